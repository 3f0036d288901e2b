"""Keeps one `dcgmi dmon` child streaming: restarts with backoff, kills it when it hangs, reaps it.

The child is started from an argv list (never a shell) in its own process group, so a kill takes
any grandchildren with it. One thread supervises; two read stdout and stderr line by line, never
holding more than MAX_LINE_CHARS of a line: a longer one is dropped and counted, and a child that prints
TOO_LONG_RESTART of them is restarted like one that crashed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Protocol

from servescope.core.dcgm.dmon_format import DmonParser, ErrorKind, ErrorLine, Event, Row, classify_error

log = logging.getLogger(__name__)

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 60.0
HEALTHY_RESET = 60.0  # a child that streamed this long resets the backoff
STARTUP_GRACE = 10.0  # before its first row a child may take this long (connecting to the host engine)
POLL = 0.1
# A dmon row of 60 fields is under 1,000 characters; 16 KiB is beyond any real line.
MAX_LINE_CHARS = 16 * 1024
# Lines too long (each MAX_LINE_CHARS of a line that does not end counts as one) before a restart.
TOO_LONG_RESTART = 8
STOP_JOIN_SECONDS = 0.5


class Child(Protocol):
    pid: int
    stdout: IO[str] | None
    stderr: IO[str] | None

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...


def spawn_process(argv: Sequence[str], env: dict[str, str] | None = None) -> Child:
    """The real spawn: argv as given, no shell, line-buffered text, own session."""
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
        start_new_session=True,
        errors="replace",
        env=env,
    )


def kill_child(child: Child) -> None:
    """SIGKILL the child's process group (falls back to the child alone)."""
    try:
        if child.pid <= 1:
            raise ProcessLookupError  # never signal a process group we do not own
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        with contextlib.suppress(ProcessLookupError, OSError):
            child.kill()


class Backoff:
    """1 s, 2 s, 4 s ... 60 s between restarts; back to 1 s after a child that ran a healthy minute."""

    def __init__(self) -> None:
        self.next_delay = BACKOFF_FIRST

    def after_exit(self, ran_for: float, produced_rows: bool) -> float:
        if produced_rows and ran_for >= HEALTHY_RESET:
            self.next_delay = BACKOFF_FIRST
        delay = self.next_delay
        self.next_delay = min(self.next_delay * 2, BACKOFF_MAX)
        return delay


@dataclass
class ChildStatus:
    running: bool = False
    down_reason: str | None = "starting"
    message: str = "dcgmi dmon has not started yet"
    restarts: int = 0
    last_row: float | None = None  # monotonic time of the last row
    last_failure: tuple[str, str] | None = None  # (reason, message) of the last child that stopped


class DmonSupervisor:
    """Runs `argv()` (re-evaluated at each start) and hands every parsed event to `on_event`."""

    def __init__(
        self,
        argv: Callable[[], list[str]],
        on_event: Callable[[Event], None],
        *,
        delay_seconds: float,
        on_restart: Callable[[str], None] | None = None,
        on_dropped_line: Callable[[str], None] | None = None,
        spawn: Callable[[Sequence[str]], Child] = spawn_process,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[threading.Event, float], bool] | None = None,
    ) -> None:
        self._argv = argv
        self._on_event = on_event
        self._on_restart = on_restart or (lambda reason: None)
        self._on_dropped_line = on_dropped_line or (lambda message: None)
        self._too_long = 0  # lines dropped for their length, in the running child's life
        self._spawn = spawn
        self._clock = clock
        self._wait = wait or (lambda event, seconds: event.wait(seconds))
        self.hang_after = 3 * delay_seconds
        self.backoff = Backoff()
        self.status = ChildStatus()
        self.delays: list[float] = []  # every backoff delay applied, for tests and /api
        self._stop = threading.Event()
        self._restart_now = threading.Event()
        self._child: Child | None = None
        self._thread: threading.Thread | None = None
        self._last_error: ErrorLine | None = None
        self._lock = threading.Lock()

    # --- control -------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dcgm-supervisor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._restart_now.set()
        child = self._child
        if child is not None:
            kill_child(child)
        if self._thread is not None:
            self._thread.join(STOP_JOIN_SECONDS)  # a daemon thread: the process may exit without it

    def restart(self, reason: str) -> None:
        """Restart the child at once (e.g. after the watch list changed), without backoff."""
        log.info("restarting dcgmi dmon: %s", reason)
        self._restart_now.set()
        child = self._child
        if child is not None:
            kill_child(child)

    # --- the loop ------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            reason, message, ran_for, rows = self._run_child()
            if self._stop.is_set():
                break
            self.status.restarts += 1
            self._on_restart(reason)
            if self._restart_now.is_set():
                self._restart_now.clear()
                continue
            repeated = self.status.last_failure is not None and self.status.last_failure[0] == reason
            self._set_down(reason, message)
            self.status.last_failure = (reason, message)
            delay = self.backoff.after_exit(ran_for, rows)
            self.delays.append(delay)
            # Say it once when a reason starts; the restarts counter tells how often it recurs.
            (log.debug if repeated else log.warning)(
                "dcgmi dmon stopped (%s): %s; restarting in %.0f s", reason, message, delay
            )
            if self._wait(self._stop, delay):
                break

    def _set_down(self, reason: str, message: str) -> None:
        self.status.running = False
        self.status.down_reason = reason
        self.status.message = message

    def _run_child(self) -> tuple[str, str, float, bool]:
        argv = self._argv()
        started = self._clock()
        self._last_error = None
        self._too_long = 0
        try:
            child = self._spawn(argv)
        except FileNotFoundError:
            return (
                "not_installed",
                f"{argv[0]} not found on PATH (install DCGM, or use --dcgm-exporter-url)",
                0.0,
                False,
            )
        except PermissionError:
            return "not_executable", f"{argv[0]} is not executable", 0.0, False
        self._child = child
        self.status.running = True
        self.status.down_reason = None
        self.status.message = "streaming"
        rows_before = self.status.last_row
        readers = [
            threading.Thread(target=self._read, args=(child.stdout, True), daemon=True),
            threading.Thread(target=self._read, args=(child.stderr, False), daemon=True),
        ]
        for reader in readers:
            reader.start()
        reason, message = self._watch(child, started)
        kill_child(child)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)  # reaped: no zombie is left behind
        for reader in readers:
            reader.join(2)
        for stream in (child.stdout, child.stderr):  # else each restart leaves two pipes to the GC
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._child = None
        produced = self.status.last_row is not None and self.status.last_row != rows_before
        return reason, message, self._clock() - started, produced

    def _watch(self, child: Child, started: float) -> tuple[str, str]:
        while True:
            code = child.poll()
            if code is not None:
                error = self._last_error
                if error is not None:
                    return error.kind.value, error.text
                return "exited", f"dcgmi dmon exited with status {code}"
            if self._stop.is_set() or self._restart_now.is_set():
                return "restart", "restart requested"
            if self._too_long >= TOO_LONG_RESTART:
                return "line_too_long", f"{self._too_long} lines over {MAX_LINE_CHARS} characters; killed"
            last_row = self.status.last_row
            if last_row is None or last_row < started:
                if self._clock() - started > max(STARTUP_GRACE, self.hang_after):
                    return "hung", "no row since the start (host engine hung?); killed"
            elif self._clock() - last_row > self.hang_after:
                return "hung", f"no row for {self.hang_after:.1f} s (host engine hung?); killed"
            self._wait(self._stop, POLL)

    def _read(self, stream: IO[str] | None, is_stdout: bool) -> None:
        if stream is None:
            return
        parser = DmonParser()
        with contextlib.suppress(ValueError, OSError):  # the pipe closes when the child is killed
            for line in self._bounded_lines(stream):
                if is_stdout:
                    event = parser.feed(line)
                else:
                    parser.line_no += 1
                    event = classify_error(line, parser.line_no) if line.strip() else None
                    if event is None and line.strip():
                        event = ErrorLine(ErrorKind.OTHER, line.strip(), parser.line_no)
                if event is None:
                    continue
                if isinstance(event, ErrorLine):
                    self._last_error = event
                elif isinstance(event, Row):
                    self.status.last_row = self._clock()
                with self._lock:
                    self._on_event(event)

    def _bounded_lines(self, stream: IO[str]) -> Iterator[str]:
        """The stream's lines, each read at most MAX_LINE_CHARS at a time; longer ones are dropped."""
        dropping = False
        while True:
            piece = stream.readline(MAX_LINE_CHARS)
            if not piece:
                return
            ended = piece.endswith("\n")
            if not dropping and (ended or len(piece) < MAX_LINE_CHARS):
                yield piece
                continue
            if len(piece) >= MAX_LINE_CHARS:  # each cap's worth of an endless line counts again
                self._too_long += 1
                with self._lock:
                    self._on_dropped_line(f"dcgmi printed a line over {MAX_LINE_CHARS} characters: dropped")
                if self._too_long >= TOO_LONG_RESTART:
                    return  # the watcher kills and restarts this child; nothing more is read from it
            dropping = not ended
