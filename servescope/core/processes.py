"""Child processes: started in their own process group, logged to a file, ready when they answer, stopped
for sure. The demo runs its stack with them; the tests and the benchmarks their servers.

Each child runs in a new session so that a terminal's Ctrl-C reaches only its parent, which then stops
the child: SIGTERM to the child's whole process group, SIGKILL after a grace period. Should the parent
itself be killed outright, the kernel sends each child SIGTERM (PR_SET_PDEATHSIG). A child's own
children (the exporter's simulated engines and fake dcgmi) stop with it: the exporter stops them on
SIGTERM, and they watch their parent, so even a SIGKILLed exporter leaves no orphans.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from servescope.core.errors import ServescopeError
from servescope.core.ports import free_port

__all__ = ["STOP_GRACE_SECONDS", "Child", "ChildFailedError", "free_port", "log_tail"]

STOP_GRACE_SECONDS = 8.0
POLL_SECONDS = 0.1
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class ChildFailedError(ServescopeError, RuntimeError):
    """A child exited or never became ready; the message names it and quotes its log."""

    reason = "child_failed"


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


@dataclass
class Child:
    """One named child process, its stdout and stderr in `log_path`."""

    name: str
    argv: Sequence[str]
    log_path: Path
    env: Mapping[str, str] | None = None
    cwd: Path | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    started_at: float | None = None  # wall clock (Unix seconds) of the start
    # Set once stopped: the group sweep below must never signal a process group id the kernel reused.
    stopped: bool = False

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.started_at = time.time()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(self.env) if self.env is not None else None,
                cwd=self.cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 (only calls prctl: no locks, no allocation)
            )

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(
        self, url: str, timeout: float, accept: Callable[[httpx.Response], bool] | None = None
    ) -> None:
        """Poll `url` until it answers 200 (or `accept` says yes); ChildFailedError on exit or timeout."""

        def answered() -> bool:
            with contextlib.suppress(httpx.HTTPError):
                response = httpx.get(url, timeout=2.0)
                return accept(response) if accept is not None else response.status_code == 200
            return False

        self._poll(answered, f"ready at {url}", timeout)

    def wait_for_output(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first match of `pattern` in what the child printed; ChildFailedError on exit or timeout."""
        regex = re.compile(pattern)
        found: list[re.Match[str]] = []

        def printed() -> bool:
            with contextlib.suppress(OSError):
                match = regex.search(self.log_path.read_text(errors="replace"))
                if match is not None:
                    found.append(match)
            return bool(found)

        self._poll(printed, f"printing {pattern!r}", timeout)
        return found[0]

    def _poll(self, done: Callable[[], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if not self.running():
                code = self.process.returncode if self.process is not None else None
                raise ChildFailedError(
                    f"{self.name} exited with status {code}; its log ({self.log_path}) ends with:\n"
                    + log_tail(self.log_path)
                )
            if done():
                return
            if time.monotonic() > deadline:
                raise ChildFailedError(
                    f"{self.name} not {what} after {timeout:.0f} s; its log ({self.log_path}) "
                    "ends with:\n" + log_tail(self.log_path)
                )
            time.sleep(POLL_SECONDS)

    def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """SIGTERM to the child's process group, SIGKILL to it after `grace` seconds."""
        if self.process is None or self.stopped:
            return
        self.stopped = True
        stop_process(self.process, grace, group=True)


def stop_process(
    process: subprocess.Popen[Any], grace: float = STOP_GRACE_SECONDS, *, group: bool = False
) -> None:
    """SIGTERM, then SIGKILL when it has not exited after `grace` seconds: to the child's whole process
    group when `group` (a child started in its own session), else to the child alone."""

    def send(sig: signal.Signals) -> None:
        if group:
            _signal_group(process.pid, sig)
        else:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)

    if process.poll() is None:
        send(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            send(signal.SIGKILL)
            process.wait()
    if group:
        # Whatever the child left in its group (it exited, its helpers may not have) goes too.
        _signal_group(process.pid, signal.SIGKILL)


def _die_with_parent() -> None:
    """In the child, before exec: get SIGTERM when the parent dies, even by SIGKILL (Linux only)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
