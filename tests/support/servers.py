"""The real `servescope serve` on a free loopback port: started, waited for until ready, stopped."""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from servescope.core.processes import Child, ChildFailedError
from tests.support.bounds import STARTUP_S

SERVESCOPE = str(Path(sys.executable).with_name("servescope"))
LISTENING = r"serving.* on 127\.0\.0\.1:(\d+)"
RUNBOOK_LISTENING = r"servescope runbook server on 127\.0\.0\.1:(\d+)"
STOP_GRACE_SECONDS = 10.0
MAX_LINE_CHARS = 64 * 1024  # a line read at once, at most: a longer one is read in parts


@dataclass
class Served:
    base: str
    child: Child

    def log(self) -> str:
        return self.child.log_path.read_text(errors="replace")


def announced_base(process: subprocess.Popen[str], listening: str, deadline: float) -> str | None:
    """The base URL of the first stdout line matching `listening` (its group 1 the port); None when
    the process ends or `deadline` (monotonic) passes first. A thread reads its stdout for as long as
    it runs (dropping the rest), so the wait is bounded and a full pipe never blocks the process."""
    assert process.stdout is not None
    found: queue.Queue[str | None] = queue.Queue(maxsize=1)
    reader = threading.Thread(
        target=_read_announcement, args=(process.stdout, re.compile(listening), found), daemon=True
    )
    reader.start()
    with suppress(queue.Empty):
        return found.get(timeout=max(0.0, deadline - time.monotonic()))
    return None


def _read_announcement(stdout: IO[str], listening: re.Pattern[str], found: queue.Queue[str | None]) -> None:
    announced = False
    with suppress(OSError, ValueError):  # the pipe closed under the reader: it is done
        for line in iter(lambda: stdout.readline(MAX_LINE_CHARS), ""):
            if not announced and (match := listening.search(line)):
                announced = True
                found.put(f"http://127.0.0.1:{match.group(1)}")
    if not announced:
        found.put(None)


def start_child(
    name: str,
    argv: list[str],
    listening: str,
    timeout: float,
    *,
    ready: str | None = None,
    cwd: Path | None = None,
) -> Served:
    """Start `argv` logging into a temporary folder, read its port from the line matching `listening`,
    then wait until GET `ready` answers 200 (when given). AssertionError quoting its log otherwise.
    Each wait is `timeout` seconds, and at least STARTUP_S (tests/support/bounds.py)."""
    timeout = max(timeout, STARTUP_S)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("NODE_NAME", None)
    child = Child(name, argv, Path(tempfile.mkdtemp(prefix=f"{name}-")) / f"{name}.log", env=env, cwd=cwd)
    child.start()
    try:
        port = child.wait_for_output(listening, timeout).group(1)
        served = Served(f"http://127.0.0.1:{port}", child)
        if ready is not None:
            child.wait_ready(served.base + ready, timeout)
    except ChildFailedError as exc:
        stop(Served("", child))
        raise AssertionError(f"{name} did not start: {exc}") from None
    return served


def start_servescope(*args: str, timeout: float = 15.0) -> Served:
    """`servescope serve --listen 127.0.0.1:0 ARGS`, once /readyz answers 200."""
    argv = [SERVESCOPE, "serve", "--listen", "127.0.0.1:0", *args]
    return start_child("servescope", argv, LISTENING, timeout, ready="/readyz")


@contextmanager
def servescope_serving(*args: str, timeout: float = 15.0) -> Iterator[Served]:
    """`start_servescope(ARGS)` for the length of a `with`: stopped on the way out, also on failure."""
    served = start_servescope(*args, timeout=timeout)
    try:
        yield served
    finally:
        stop(served)


def stop(served: Served) -> None:
    """Stop the child (SIGTERM to its group, SIGKILL after a grace) and remove its log."""
    served.child.stop(STOP_GRACE_SECONDS)
    shutil.rmtree(served.child.log_path.parent, ignore_errors=True)
