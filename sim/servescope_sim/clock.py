"""The fake clock of the simulated node, of the tests and of the benchmarks: time moves only when told."""

from __future__ import annotations

CLOCK_START = 1000.0


class FakeClock:
    """A monotonic clock that only moves when told to."""

    def __init__(self, start: float = CLOCK_START) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
