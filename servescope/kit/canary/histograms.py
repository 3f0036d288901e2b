"""A revision's latency histogram over the window, as Prometheus answers it: cumulative counts per `le`.

Two revisions are compared on the bounds they share: dropping a bound from a cumulative histogram merges
two buckets and loses nothing else, so both histograms on their common bounds are exact (a canary whose
engine has other buckets is compared at the coarser resolution both allow).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


def parse_le(text: str) -> float:
    """A bucket bound as Prometheus writes it (`0.5`, `+Inf`); ValueError otherwise."""
    value = float(text)
    if math.isnan(value):
        raise ValueError(f"le={text!r} is not a bucket bound")
    return value


@dataclass(frozen=True)
class Histogram:
    """Bounds in ascending order (the last +Inf) and the cumulative count at each."""

    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]

    @classmethod
    def from_buckets(cls, buckets: Mapping[float, float]) -> Histogram:
        """From {bound: cumulative count}; counts made non-decreasing (increase() may dip by rounding)."""
        bounds = tuple(sorted(buckets))
        cumulative, highest = [], 0.0
        for bound in bounds:
            highest = max(highest, buckets[bound])
            cumulative.append(highest)
        return cls(bounds, tuple(cumulative))

    @property
    def count(self) -> float:
        """Observations in the histogram (its +Inf bucket)."""
        if not self.bounds or not math.isinf(self.bounds[-1]):
            return 0.0
        return self.cumulative[-1]

    def on(self, bounds: tuple[float, ...]) -> Histogram:
        """The histogram on a subset of its bounds."""
        at = dict(zip(self.bounds, self.cumulative, strict=True))
        return Histogram(bounds, tuple(at[bound] for bound in bounds))

    def counts(self) -> list[float]:
        """Observations per bucket (le_{i-1}, le_i]."""
        previous, out = 0.0, []
        for value in self.cumulative:
            out.append(max(0.0, value - previous))
            previous = value
        return out

    def quantile(self, q: float) -> float:
        """histogram_quantile's estimate: linear within the bucket, the last finite bound for the +Inf one."""
        total = self.count
        if total <= 0 or len(self.bounds) < 2:
            return math.nan
        rank = q * total
        lower_bound, lower_count = 0.0, 0.0
        for bound, value in zip(self.bounds, self.cumulative, strict=True):
            if value >= rank:
                if math.isinf(bound):
                    return lower_bound
                if value == lower_count:
                    return bound
                return lower_bound + (bound - lower_bound) * (rank - lower_count) / (value - lower_count)
            lower_bound, lower_count = bound, value
        return lower_bound

    def at_or_below(self, bound: float) -> float:
        """Observations at or below `bound`, which must be one of the bounds."""
        return dict(zip(self.bounds, self.cumulative, strict=True))[bound]


def common(first: Histogram, second: Histogram) -> tuple[Histogram, Histogram]:
    """Both histograms on the bounds they share (+Inf always among them when both have it)."""
    shared = tuple(sorted(set(first.bounds) & set(second.bounds)))
    return first.on(shared), second.on(shared)
