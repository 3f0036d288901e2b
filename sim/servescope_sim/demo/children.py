"""Child processes of the demo: the common ones (servescope.core.processes), each started in its own
process group, logged to a file under the state directory, stopped for sure, last started first."""

from __future__ import annotations

from servescope.core.processes import STOP_GRACE_SECONDS, Child, ChildFailedError, free_port, log_tail

__all__ = ["STOP_GRACE_SECONDS", "Child", "ChildFailedError", "free_port", "log_tail"]
