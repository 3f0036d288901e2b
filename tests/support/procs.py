"""The processes below a process, as /proc shows them, and waiting until they have all exited."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from servescope.exporter.vllm.procfs import ProcFs
from tests.support.waiting import wait_for


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (children that exited but were not reaped yet included), not `pid`."""
    return ProcFs().descendants({pid}) - {pid}


def zombie(pid: int) -> bool:
    """Whether `pid` has exited and only waits for its parent to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
        return stat.rsplit(")", 1)[1].split()[0] == "Z"  # the name in () may hold spaces
    except (OSError, IndexError):
        return False


def running(pids: Iterable[int]) -> set[int]:
    """Those of `pids` still running: a zombie has exited."""
    return {pid for pid in pids if Path(f"/proc/{pid}").exists() and not zombie(pid)}


def wait_all_exited(pids: Iterable[int], timeout: float) -> None:
    """Returns once none of `pids` runs; AssertionError naming those left after `timeout` seconds."""
    watched = set(pids)
    try:
        wait_for(f"{len(watched)} processes to exit", lambda: not running(watched), timeout, every=0.5)
    except AssertionError as error:
        raise AssertionError(f"{error}; still running: {sorted(running(watched))}") from error
