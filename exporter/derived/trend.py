"""Robust memory growth rate (Theil-Sen) and time to exhaustion."""

from __future__ import annotations

import math
from collections.abc import Sequence

# Pure Python costs ~0.55 us per pairwise slope (compute + sort) on the reference box: all 179,700
# pairs of 600 points take ~100 ms, too long for a per-second loop. Capping at 32k pairs (every 6th
# lag at 600 points) measured ~12 ms; the subset is deterministic, so results are reproducible.
DEFAULT_MAX_PAIRS = 32_000


def _subsample(
    times: Sequence[float], values: Sequence[float], max_points: int
) -> tuple[list[float], list[float]]:
    """Evenly spaced subset of at most max_points samples, endpoints kept."""
    n = len(times)
    if n <= max_points:
        return list(times), list(values)
    picks = [round(i * (n - 1) / (max_points - 1)) for i in range(max_points)]
    return [times[i] for i in picks], [values[i] for i in picks]


def _median(sorted_values: list[float]) -> float:
    mid = len(sorted_values) // 2
    if len(sorted_values) % 2:
        return sorted_values[mid]
    return (sorted_values[mid - 1] + sorted_values[mid]) / 2


def theil_sen_slope(
    times: Sequence[float],
    values: Sequence[float],
    max_points: int = 600,
    max_pairs: int = DEFAULT_MAX_PAIRS,
) -> float | None:
    """Median of pairwise slopes (units per second); None with fewer than two distinct times."""
    if len(times) != len(values):
        raise ValueError(f"times and values differ in length: {len(times)} vs {len(values)}")
    if max_points < 2:
        raise ValueError(f"max_points must be >= 2, got {max_points}")
    ts, vs = _subsample(times, values, max_points)
    n = len(ts)
    total_pairs = n * (n - 1) // 2
    # Pairs are taken by lag (index distance); keeping every lag_step-th lag bounds the count while
    # still spanning short and long baselines, which is what makes the sawtooth cancel out.
    lag_step = max(1, math.ceil(total_pairs / max_pairs))
    slopes: list[float] = []
    for lag in range(lag_step, n, lag_step):
        slopes.extend(
            (v2 - v1) / (t2 - t1)
            for t1, v1, t2, v2 in zip(ts, vs, ts[lag:], vs[lag:], strict=False)
            if t2 != t1
        )
    if not slopes:
        return None
    slopes.sort()
    return _median(slopes)


def seconds_to_exhaustion(used: float, total: float, slope: float | None) -> float:
    """Seconds until used reaches total at the given growth rate (bytes/s); inf when not growing."""
    if used >= total:
        return 0.0
    if slope is None or slope <= 0:
        return math.inf
    return (total - used) / slope
