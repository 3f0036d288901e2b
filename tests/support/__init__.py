"""What the tests share to run real processes: the common child (started in its own group, ready when
it answers, stopped for sure), the real exporter on a free port, free ports, waiting on a condition,
and waiting on a process's descendants to exit."""

from __future__ import annotations

from servescope.common.processes import Child, ChildFailedError, free_port
from tests.support.procs import descendants, wait_all_exited, zombie
from tests.support.servers import SERVESCOPE, Served, servescope_serving, start_child, start_servescope, stop
from tests.support.waiting import wait_for

__all__ = [
    "SERVESCOPE",
    "Child",
    "ChildFailedError",
    "Served",
    "descendants",
    "free_port",
    "servescope_serving",
    "start_child",
    "start_servescope",
    "stop",
    "wait_all_exited",
    "wait_for",
    "zombie",
]
