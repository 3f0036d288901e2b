"""Statistics for comparing two runs: percentile bootstrap intervals and the Mann-Whitney rank test."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Statistic = Callable[[Sequence[float]], float]


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """Percentile-bootstrap intervals at `confidence` from `resamples` resamples, seeded for repeatability."""

    confidence: float = 0.95
    resamples: int = 1000

    def interval(
        self, values: Sequence[float], statistic: Statistic, *, seed: int = 0
    ) -> tuple[float, float]:
        """Interval of `statistic` over `values`; raises ValueError when empty."""
        if not values:
            raise ValueError("a bootstrap interval needs at least one value")
        rng = random.Random(seed)
        return self._bounds([statistic(_resample(values, rng)) for _ in range(self.resamples)])

    def difference(
        self, a: Sequence[float], b: Sequence[float], statistic: Statistic, *, seed: int = 0
    ) -> tuple[float, float]:
        """Interval of statistic(b) - statistic(a), each side resampled on its own."""
        if not a or not b:
            raise ValueError("a bootstrap difference needs values on both sides")
        rng = random.Random(seed)
        diffs = []
        for _ in range(self.resamples):
            left = statistic(_resample(a, rng))
            right = statistic(_resample(b, rng))
            diffs.append(right - left if math.isfinite(left) or math.isfinite(right) else 0.0)
        return self._bounds([d if not math.isnan(d) else 0.0 for d in diffs])

    def _bounds(self, estimates: list[float]) -> tuple[float, float]:
        ordered = sorted(estimates)
        tail = (1 - self.confidence) / 2
        return ordered[int(tail * (self.resamples - 1))], ordered[
            math.ceil((1 - tail) * (self.resamples - 1))
        ]


def _resample(values: Sequence[float], rng: random.Random) -> list[float]:
    """As many values as there are, drawn with replacement."""
    return [values[rng.randrange(len(values))] for _ in values]


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
