"""Statistics for comparing two runs: percentile bootstrap intervals and the Mann-Whitney rank test."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence


def bootstrap_interval(
    values: Sequence[float],
    statistic: Callable[[Sequence[float]], float],
    *,
    confidence: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of `statistic` over `values`; raises ValueError when empty."""
    if not values:
        raise ValueError("a bootstrap interval needs at least one value")
    rng = random.Random(seed)
    n = len(values)
    estimates = sorted(statistic([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    tail = (1 - confidence) / 2
    return estimates[int(tail * (resamples - 1))], estimates[math.ceil((1 - tail) * (resamples - 1))]


def bootstrap_difference(
    a: Sequence[float],
    b: Sequence[float],
    statistic: Callable[[Sequence[float]], float],
    *,
    confidence: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of statistic(b) - statistic(a), each resampled on its own."""
    if not a or not b:
        raise ValueError("a bootstrap difference needs values on both sides")
    rng = random.Random(seed)
    diffs = []
    for _ in range(resamples):
        left = statistic([a[rng.randrange(len(a))] for _ in a])
        right = statistic([b[rng.randrange(len(b))] for _ in b])
        diffs.append(right - left if math.isfinite(left) or math.isfinite(right) else 0.0)
    diffs = sorted(d if not math.isnan(d) else 0.0 for d in diffs)
    tail = (1 - confidence) / 2
    return diffs[int(tail * (resamples - 1))], diffs[math.ceil((1 - tail) * (resamples - 1))]


def mann_whitney_greater(a: Sequence[float], b: Sequence[float]) -> float:
    """One-sided p-value that `b` tends to be larger than `a` (normal approximation, ties corrected)."""
    if not a or not b:
        raise ValueError("the rank test needs values on both sides")
    pooled = sorted([(value, 0) for value in a] + [(value, 1) for value in b], key=lambda item: item[0])
    n = len(pooled)
    rank_sum_b, ties, i = 0.0, 0.0, 0
    while i < n:
        j = i
        while j + 1 < n and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        average = (i + j) / 2 + 1
        rank_sum_b += average * sum(1 for k in range(i, j + 1) if pooled[k][1] == 1)
        size = j - i + 1
        ties += size**3 - size
        i = j + 1
    n_a, n_b = len(a), len(b)
    u_b = rank_sum_b - n_b * (n_b + 1) / 2
    mean = n_a * n_b / 2
    variance = n_a * n_b / 12 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if variance <= 0:
        return 1.0 if u_b <= mean else 0.0
    z = (u_b - mean - 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2))
