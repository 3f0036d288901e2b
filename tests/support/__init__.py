"""What the tests share to run real processes: the common child (started in its own group, ready when
it answers, stopped for sure), the real exporter on a free port, free ports, and waiting on a condition."""

from __future__ import annotations

from servescope.common.processes import Child, ChildFailedError, free_port
from tests.support.servers import SERVESCOPE, Served, servescope_serving, start_child, start_servescope, stop
from tests.support.waiting import wait_for

__all__ = [
    "SERVESCOPE",
    "Child",
    "ChildFailedError",
    "Served",
    "free_port",
    "servescope_serving",
    "start_child",
    "start_servescope",
    "stop",
    "wait_for",
]
