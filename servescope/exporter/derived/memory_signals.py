"""Signals of one memory track: peak and minimum, growth over 5 and 30 minutes, exhaustion, leak verdict."""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field

from servescope.core.catalog.derived import WINDOWS
from servescope.exporter.derived.leak import (
    LeakThresholds,
    LeakVerdict,
    Series,
    assess_leak,
    half_change_relative,
    half_change_stderr,
)
from servescope.exporter.derived.trend import (
    ROBUST_POINTS,
    bucket_medians,
    robust_slope,
    seconds_to_exhaustion,
)

LEAK_WINDOW_SECONDS = 1800.0
# A verdict needs this much history: enough for both halves to show a trend through the sawtooth.
LEAK_MIN_HISTORY_SECONDS = 240.0
# A window's growth rate is only stated once the history covers this share of the window.
MIN_WINDOW_COVERAGE = 0.5
LEAK_BUCKET_MIN_SECONDS = 5.0
# A load rise counts beyond this many standard errors of its halves' difference (~0.1% by chance).
RISE_SIGMAS = 3.0
_NO_HISTORY = LeakVerdict(False, "no history yet")


@dataclass(frozen=True)
class TrendReport:
    """Trends of one track, computed together (they are the expensive part) and reused until stale."""

    computed_at: float
    history_seconds: float
    slopes: dict[str, float] = field(default_factory=dict)  # window name -> bytes/s
    verdict: LeakVerdict = _NO_HISTORY
    # Windows over which the serving load rose: their growth follows traffic, which the engine's
    # budget bounds, so it is not extrapolated to an exhaustion.
    follows_load: frozenset[str] = frozenset()

    def exhaustion_slope(self, window: str) -> float | None:
        """The window's growth as a rate to extrapolate; None where it follows a rise in load."""
        return None if window in self.follows_load else self.slopes.get(window)


def trend_report(
    times: list[float],
    values: list[float],
    now: float,
    load: Series | None = None,
    kv: Series | None = None,
) -> TrendReport:
    """Trends from the newest LEAK_WINDOW_SECONDS of samples (the longest window)."""
    if len(times) < 2:
        return TrendReport(now, 0.0)
    history = times[-1] - times[0]
    slopes: dict[str, float] = {}
    follows: set[str] = set()
    for name, seconds in WINDOWS.items():
        start = bisect_left(times, now - seconds)
        covered = times[-1] - times[start] if start < len(times) else 0.0
        if covered >= seconds * MIN_WINDOW_COVERAGE:
            slope = robust_slope(times[start:], values[start:])
            if slope is not None:
                slopes[name] = slope
                if load is not None and load_rose(load, now - seconds):
                    follows.add(name)
    start = bisect_left(times, now - LEAK_WINDOW_SECONDS)
    span = times[-1] - times[start]
    if span < LEAK_MIN_HISTORY_SECONDS:
        verdict = LeakVerdict(False, f"{history:.0f} s of history, {LEAK_MIN_HISTORY_SECONDS:.0f} s needed")
    else:
        # One pass of bucket medians (~60 points) feeds the verdict's three fits: cheap to refit.
        bt, bv = bucket_medians(
            times[start:], values[start:], max(LEAK_BUCKET_MIN_SECONDS, span / ROBUST_POINTS)
        )
        verdict = assess_leak(bt, bv, load, kv)
    return TrendReport(now, history, slopes, verdict, frozenset(follows))


def load_rose(load: Series, since: float, max_change: float = LeakThresholds.max_load_change) -> bool:
    """Whether the load's samples from `since` rose by more than the leak verdict's max_load_change, and
    by more than RISE_SIGMAS standard errors of the halves' difference.

    Memory that follows a ramp stops growing when the ramp ends; extrapolated, it "exhausts" a GPU
    whose engine never leaves its budget. The noise bound keeps a 5 min window of Poisson arrivals,
    which can read 20% by chance, from hiding a leak's exhaustion now and then.
    """
    times, values = load
    start = bisect_left(times, since)
    window = (times[start:], values[start:])
    change, stderr = half_change_relative(window), half_change_stderr(window)
    return change is not None and stderr is not None and change > max(max_change, RISE_SIGMAS * stderr)


def exhaustion(used: float, capacity: float, slope: float | None) -> float:
    """Seconds to exhaustion; +Inf without a usable capacity."""
    if capacity <= 0:
        return math.inf
    return seconds_to_exhaustion(used, capacity, slope)
