"""The operators' batch-size controller, pure: a window's P99 and GPU use in, a max_num_seqs out."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_SLO_SECONDS = 0.5
DEFAULT_LOW_UTILISATION = 0.5
DEFAULT_MAX_SEQS = 256

LATENCY_OVER_SLO = "latency_over_slo"
GPU_UNDERUTILISED = "gpu_underutilised"
WITHIN_SLO = "within_slo"
NO_TRAFFIC = "no_traffic"


@dataclass(frozen=True)
class Recommendation:
    """The max_num_seqs to run next and the rule that chose it."""

    value: int
    reason: str


def _bound(le: str) -> float:
    try:
        return float(le)
    except ValueError:
        raise ValueError(f"histogram bucket le={le!r}: not a number") from None


def _window_counts(start: Mapping[str, float], end: Mapping[str, float]) -> list[tuple[float, float]]:
    """Cumulative counts observed inside the window, sorted by bound and made monotonic."""
    # A restarted server starts its counters again from zero: the end snapshot alone is the window then.
    reset = any(end[le] < start.get(le, 0.0) for le in end)
    counts = sorted((_bound(le), end[le] - (0.0 if reset else start.get(le, 0.0))) for le in end)
    monotonic: list[tuple[float, float]] = []
    running = 0.0
    for bound, count in counts:
        # Scrapes are not atomic across buckets; Prometheus papers over that the same way.
        running = max(running, count)
        monotonic.append((bound, running))
    return monotonic


def p99_from_deltas(
    start: Mapping[str, float], end: Mapping[str, float], quantile: float = 0.99
) -> float | None:
    """Prometheus' histogram_quantile over the window between two cumulative bucket snapshots."""
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile: expected 0-1, got {quantile}")
    counts = _window_counts(start, end)
    if not counts or counts[-1][0] != math.inf:
        raise ValueError('histogram: no le="+Inf" bucket in the end snapshot')
    if len(counts) < 2:
        raise ValueError("histogram: no finite bucket bound")
    total = counts[-1][1]
    if total <= 0:
        return None
    rank = quantile * total
    index = next(i for i, (_, count) in enumerate(counts) if count >= rank)
    bound, count = counts[index]
    if bound == math.inf:
        # Nothing is known about observations past the last finite bound, so report that bound.
        return counts[-2][0]
    if index == 0 and bound <= 0.0:
        return bound
    below_bound, below_count = counts[index - 1] if index else (0.0, 0.0)
    if count == below_count:
        return bound
    return below_bound + (bound - below_bound) * (rank - below_count) / (count - below_count)


def _check(current: int, slo: float, utilisation: float, low_util: float, max_seqs: int) -> None:
    if max_seqs < 1:
        raise ValueError(f"max_seqs: expected at least 1, got {max_seqs}")
    if current < 1:
        raise ValueError(f"current: expected at least 1, got {current}")
    if slo <= 0:
        raise ValueError(f"slo: expected seconds above 0, got {slo}")
    # Catches a percentage (85) passed where a fraction (0.85) is meant.
    for name, value in (("utilisation", utilisation), ("low_util", low_util)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name}: expected a fraction 0-1, got {value}")


def recommend(
    current: int,
    p99: float | None,
    *,
    utilisation: float,
    slo: float = DEFAULT_SLO_SECONDS,
    low_util: float = DEFAULT_LOW_UTILISATION,
    max_seqs: int = DEFAULT_MAX_SEQS,
) -> Recommendation:
    """One step of the operators' controller; the value always lies within [1, max_seqs]."""
    _check(current, slo, utilisation, low_util, max_seqs)
    current = min(current, max_seqs)
    if p99 is None:
        # An idle window says nothing about latency under load: moving on it would be a guess.
        return Recommendation(current, NO_TRAFFIC)
    if p99 > slo:
        # Latency is checked first and wins: a busy-but-slow GPU must shed batch, never gain it.
        # x0.8 rounded down (integer maths, no float drift); from 2 upwards that always drops one or more.
        return Recommendation(max(1, current * 4 // 5), LATENCY_OVER_SLO)
    if utilisation < low_util:
        # Latency has headroom and the GPU idles: a wider batch buys QPS (their 1→8 run: 3.2x per GPU).
        # x1.2 rounded up, so small batches still move (1→2, 4→5 where rounding down would stall).
        return Recommendation(min(max_seqs, -(-current * 6 // 5)), GPU_UNDERUTILISED)
    return Recommendation(current, WITHIN_SLO)
