"""What the tests share to run real processes: the common child (started in its own group, ready when
it answers, stopped for sure), the real exporter on a free port, free ports, waiting on a condition,
waiting on a process's descendants to exit, a process held to a share of a CPU, and the generous bound
on a wait a test asserts."""

from __future__ import annotations

from servescope.core.processes import Child, ChildFailedError, free_port
from tests.support.bounds import STARTUP_S, STARVED_S, generous
from tests.support.procs import cpu_limited, descendants, wait_all_exited, zombie
from tests.support.servers import SERVESCOPE, Served, servescope_serving, start_child, start_servescope, stop
from tests.support.waiting import wait_for

__all__ = [
    "SERVESCOPE",
    "STARTUP_S",
    "STARVED_S",
    "Child",
    "ChildFailedError",
    "Served",
    "cpu_limited",
    "descendants",
    "free_port",
    "generous",
    "servescope_serving",
    "start_child",
    "start_servescope",
    "stop",
    "wait_all_exited",
    "wait_for",
    "zombie",
]
