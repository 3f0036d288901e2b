"""The processes below a process, as /proc shows them, waiting until they have all exited, and holding
a process to a share of a CPU."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterable, Iterator
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


@contextlib.contextmanager
def cpu_limited(pid: int, share: float, period_s: float = 0.1) -> Iterator[None]:
    """`pid` runs for `share` of every `period_s` and is stopped for the rest, as a CFS quota throttles
    a container at its CPU limit (it runs out its quota, then waits for the next period). Costs no CPU,
    so nothing else on the machine is starved with it; the process runs freely again on exit."""
    done = threading.Event()

    def cycle() -> None:
        while not done.is_set():
            try:
                os.kill(pid, signal.SIGCONT)
                done.wait(period_s * share)
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                return
            done.wait(period_s * (1 - share))

    thread = threading.Thread(target=cycle, name=f"cpu-limit-{pid}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
