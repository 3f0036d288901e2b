"""`capacity compare A B`: is B a significant regression of A, on tail latency or on the knee?

Latency is compared at one offered rate both runs measured: the highest common rate at or below A's
knee lower bound (the exponential bracket's rates are shared when both runs start at the same rate),
pooling every seed's requests. B regresses when its requests are slower by the one-sided Mann-Whitney
test (p < alpha), the bootstrap interval of P99(B) - P99(A) lies above 0, and P99 rose by more than
`min_effect`; or when B's knee interval lies wholly below A's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from servescope.kit.capacity.result import CapacityRun
from servescope.kit.capacity.stats import Bootstrap, mann_whitney_greater
from servescope.kit.capacity.steps import latency_quantile


@dataclass(frozen=True, slots=True)
class Comparison:
    """The verdict and the figures behind it."""

    offered: float
    metric: str
    p99_a: float
    p99_b: float
    p99_a_interval: tuple[float, float]
    p99_b_interval: tuple[float, float]
    p99_difference_interval: tuple[float, float]
    rank_p_value: float
    knee_a: tuple[float, float, float]  # estimate, lower, upper
    knee_b: tuple[float, float, float]
    latency_regression: bool
    knee_regression: bool

    @property
    def regression(self) -> bool:
        return self.latency_regression or self.knee_regression


def _p99(values: Sequence[float]) -> float:
    return latency_quantile(values, 0.99)


def common_rate(a: CapacityRun, b: CapacityRun) -> float:
    """The rate both runs measured that compare tests; raises ValueError when there is none."""
    shared = {rate for rate, _ in a.latencies} & {rate for rate, _ in b.latencies}
    if not shared:
        raise ValueError("the two runs share no offered rate: start both at the same --start-qps")
    below = [rate for rate in shared if rate <= a.knee.lower]
    return max(below) if below else min(shared)


def compare(
    a: CapacityRun, b: CapacityRun, *, alpha: float = 0.05, min_effect: float = 0.05, resamples: int = 1000
) -> Comparison:
    """Compare run `b` against the baseline `a`."""
    rate = common_rate(a, b)
    left = [v for (r, _), values in a.latencies.items() if r == rate for v in values]
    right = [v for (r, _), values in b.latencies.items() if r == rate for v in values]
    p99_a, p99_b = _p99(left), _p99(right)
    bootstrap = Bootstrap(resamples=resamples)
    difference = bootstrap.difference(left, right, _p99)
    p_value = mann_whitney_greater(left, right)
    grew = p99_b > p99_a * (1 + min_effect) if math.isfinite(p99_a) else False
    latency_regression = p_value < alpha and difference[0] > 0 and grew
    knee_a = (a.knee.estimate, a.knee.lower, a.knee.upper)
    knee_b = (b.knee.estimate, b.knee.lower, b.knee.upper)
    return Comparison(
        offered=rate,
        metric=a.plan.slos[0].metric,
        p99_a=p99_a,
        p99_b=p99_b,
        p99_a_interval=bootstrap.interval(left, _p99),
        p99_b_interval=bootstrap.interval(right, _p99, seed=1),
        p99_difference_interval=difference,
        rank_p_value=p_value,
        knee_a=knee_a,
        knee_b=knee_b,
        latency_regression=latency_regression,
        knee_regression=b.knee.upper < a.knee.lower,
    )


def describe(result: Comparison) -> str:
    """A few lines a CI log shows."""
    ms = 1000
    a_low, a_high = (v * ms for v in result.p99_a_interval)
    b_low, b_high = (v * ms for v in result.p99_b_interval)
    d_low, d_high = (v * ms for v in result.p99_difference_interval)
    lines = [
        f"at {result.offered:g} req/s, p99 {result.metric}: A {result.p99_a * ms:.1f} ms "
        f"[{a_low:.1f}, {a_high:.1f}], B {result.p99_b * ms:.1f} ms [{b_low:.1f}, {b_high:.1f}]",
        f"p99 B - A: [{d_low:.1f}, {d_high:.1f}] ms "
        f"(95 % bootstrap); Mann-Whitney p = {result.rank_p_value:.3g} (B slower)",
        f"knee: A {result.knee_a[0]:.2f} [{result.knee_a[1]:.2f}, {result.knee_a[2]:.2f}] req/s, "
        f"B {result.knee_b[0]:.2f} [{result.knee_b[1]:.2f}, {result.knee_b[2]:.2f}] req/s",
        "verdict: "
        + ("REGRESSION" if result.regression else "no significant regression")
        + (" (latency)" if result.latency_regression else "")
        + (" (knee)" if result.knee_regression else ""),
    ]
    return "\n".join(lines)
