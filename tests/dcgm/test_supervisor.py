"""The dmon supervisor on a fake clock: exponential backoff, its reset, a silent child killed."""

from __future__ import annotations

import io
import itertools
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from servescope.exporter.dcgm.supervisor import Backoff, Child, DmonSupervisor
from tests.helpers import FakeClock

FAKE_DCGMI = str(Path(sys.executable).with_name("servescope-fake-dcgmi"))


class FakeChild:
    """A child process that exits when the fake clock reaches `exit_at` (None: never by itself)."""

    pid = 10**8  # not a real process: kill_child falls back to kill()

    def __init__(self, clock: FakeClock, output: str, exit_at: float | None) -> None:
        self.stdout = io.StringIO(output)
        self.stderr = io.StringIO("")
        self._clock = clock
        self._exit_at = exit_at
        self.killed = False

    def poll(self) -> int | None:
        if self.killed:
            return -9
        if self._exit_at is not None and self._clock() >= self._exit_at:
            return 1
        return None

    def wait(self, timeout: float | None = None) -> int:
        return self.poll() or 0

    def kill(self) -> None:
        self.killed = True


def fake_wait(clock: FakeClock, log: list[float]) -> Callable[[threading.Event, float], bool]:
    def wait(event: threading.Event, seconds: float) -> bool:
        if seconds > 0.5:
            log.append(seconds)
        clock.advance(seconds)
        time.sleep(0.0005)  # let reader threads run
        return event.is_set()

    return wait


def faked_supervisor(
    spawn: Callable[[Sequence[str]], Child],
    clock: FakeClock,
    waited: list[float],
    *,
    delay: float,
    argv: Callable[[], list[str]] = lambda: ["dcgmi"],
    on_event: Callable[[Any], None] = lambda event: None,
) -> DmonSupervisor:
    """A supervisor on the fake clock: children from `spawn`, its waits logged in `waited`."""
    return DmonSupervisor(
        argv, on_event, delay_seconds=delay, spawn=spawn, clock=clock, wait=fake_wait(clock, waited)
    )


def test_exits_back_off_exponentially_to_a_minute() -> None:
    clock, waited = FakeClock(), []
    spawned: list[float] = []
    supervisor: DmonSupervisor

    def spawn(argv: Sequence[str]) -> Child:
        spawned.append(clock())
        if len(spawned) == 9:
            supervisor._stop.set()
        return FakeChild(clock, "", exit_at=clock())

    supervisor = faked_supervisor(spawn, clock, waited, delay=1.0, argv=lambda: ["dcgmi", "dmon"])
    supervisor._run()
    assert supervisor.delays == [1, 2, 4, 8, 16, 32, 60, 60]
    gaps = [b - a for a, b in itertools.pairwise(spawned)]
    assert gaps == pytest.approx([1, 2, 4, 8, 16, 32, 60, 60], abs=0.2)


def test_a_healthy_minute_resets_the_backoff() -> None:
    clock, waited = FakeClock(), []
    row = "#Entity  POWER\nID\nGPU 0  100\n"
    runs = [None, None, 61.0, None]  # third child streams for 61 s before it exits
    supervisor: DmonSupervisor

    def spawn(argv: Sequence[str]) -> Child:
        lasts = runs.pop(0)
        if not runs:
            supervisor._stop.set()
        return FakeChild(clock, row if lasts else "", exit_at=clock() + (lasts or 0))

    supervisor = faked_supervisor(spawn, clock, waited, delay=30.0)
    supervisor._run()
    assert supervisor.delays == [1, 2, 1]


def test_backoff_policy() -> None:
    policy = Backoff()
    assert [policy.after_exit(1, produced_rows=True) for _ in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert policy.after_exit(59, produced_rows=True) == 60
    assert policy.after_exit(61, produced_rows=False) == 60  # a minute of silence is not healthy
    assert policy.after_exit(61, produced_rows=True) == 1


def test_a_child_silent_for_three_delays_is_killed_on_the_fake_clock() -> None:
    clock, waited = FakeClock(), []
    children: list[FakeChild] = []
    row_seen_at: list[float] = []
    supervisor: DmonSupervisor

    def spawn(argv: Sequence[str]) -> Child:
        if children:
            supervisor._stop.set()
        children.append(FakeChild(clock, "#Entity  POWER\nID\nGPU 0  100\n", exit_at=None))
        return children[-1]

    def on_event(event: object) -> None:
        if type(event).__name__ == "Row":
            row_seen_at.append(clock())

    supervisor = faked_supervisor(spawn, clock, waited, delay=1.0, on_event=on_event)
    supervisor._run()
    assert children[0].killed
    assert supervisor.status.last_failure is not None and supervisor.status.last_failure[0] == "hung"
    assert waited == [1.0]  # the kill was followed by the first backoff step
    silent_for = _kill_time(waited, clock) - row_seen_at[0]
    assert 3.0 < silent_for <= 3.2


def _kill_time(waited: list[float], clock: FakeClock) -> float:
    # The clock now stands at: kill time + the backoff wait that followed it.
    return clock() - sum(waited)
