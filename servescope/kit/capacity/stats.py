"""Comparing two runs' tail latency at one rate from independent parts, not from correlated requests.

Latencies within a load step are correlated: a queue that builds delays everyone behind it, and near
capacity the slow requests come in clusters longer than any resampling block a step can afford (a
request-by-request bootstrap flags one identical pair in three; a block bootstrap of one step still
one in ten, tests/capacity/test_stats.py). The parts of a powered step are independent (own seed, own
warm-up, run one after another), so each part's quantile is one observation: the runs are compared by
Welch's one-sided t-test on the logarithms of their parts' quantiles (the log makes a slowdown a
shift and tames the quantiles' right skew).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from servescope.kit.capacity.quantiles import point, student_t_quantile

__all__ = ["CAP", "part_logs", "point", "welch_lower"]

CAP = 100.0  # a part whose quantile was never answered counts as this many times the bound


def part_logs(parts: Sequence[Sequence[float]], q: float, bound: float) -> list[float]:
    """The log of each part's q-quantile (a never-answered one capped at CAP x the bound)."""
    return [math.log(min(max(point(part, q), 1e-9), CAP * bound)) for part in parts if part]


def welch_lower(a: Sequence[float], b: Sequence[float], alpha: float) -> tuple[float, float, float]:
    """(one-sided 1 - alpha lower bound of mean(b) - mean(a), the difference itself, degrees of freedom)
    by Welch's t-test; both sides need at least two observations."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError("each run needs its step at the common rate in at least two parts")
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    difference = statistics.fmean(b) - statistics.fmean(a)
    if va + vb == 0:
        return difference, difference, math.inf
    df = (va + vb) ** 2 / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
    return difference - student_t_quantile(1 - alpha, df) * math.sqrt(va + vb), difference, df
