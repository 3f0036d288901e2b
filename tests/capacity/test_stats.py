"""The quantile intervals and the block bootstrap against values worked out by hand and known coverage."""

from __future__ import annotations

import math
import random

import pytest

from servescope.kit.capacity import stats
from servescope.kit.capacity.quantiles import (
    binomial_cdf,
    inflation,
    order_indices,
    quantile_interval,
    student_t_quantile,
)


def test_binomial_and_student_t_match_their_tables() -> None:
    assert binomial_cdf(2, 10, 0.5) == pytest.approx(56 / 1024)
    assert binomial_cdf(-1, 10, 0.5) == 0.0 and binomial_cdf(10, 10, 0.5) == 1.0
    for df, value in ((1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042)):
        assert student_t_quantile(0.975, df) == pytest.approx(value, abs=1e-3)


def test_order_statistics_need_368_requests_to_bound_a_p99_from_above() -> None:
    # P(no request above the P99 among n) = 0.99^n falls under 2.5 % only from n = 368 on.
    assert order_indices(367, 0.99, 0.95)[1] == 368  # no order statistic is high enough: +inf
    assert order_indices(368, 0.99, 0.95)[1] <= 368
    low, high = order_indices(1000, 0.99, 0.95)
    assert 980 <= low < 990 < high <= 1000


def _ar1(n: int, phi: float, rng: random.Random) -> list[float]:
    x, out = rng.gauss(0, 1) / math.sqrt(1 - phi * phi), []
    for _ in range(n):
        x = phi * x + rng.gauss(0, 1)
        out.append(x)
    return out


@pytest.mark.slow
def test_the_interval_covers_the_quantile_of_independent_and_of_correlated_latencies() -> None:
    rng = random.Random(7)
    trials, true_exp = 80, math.log(100)  # the P99 of Exp(1)
    iid = sum(
        low <= true_exp <= high
        for low, high, _ in (
            quantile_interval([[rng.expovariate(1) for _ in range(800)]], 0.99, 2.0) for _ in range(trials)
        )
    )
    # A strongly correlated series (AR(1), phi 0.95: clusters of ~40 requests), whose P99 is 2.326 sd.
    sd = 1 / math.sqrt(1 - 0.95**2)
    clustered = [_ar1(1200, 0.95, rng) for _ in range(trials)]
    covered = sum(
        low <= 2.326 * sd <= high
        for low, high, _ in (quantile_interval([s], 0.99, 1.0 * sd) for s in clustered)
    )
    print(
        f"\ncoverage of the 95 % interval: independent {iid / trials:.2f}, clustered {covered / trials:.2f}"
    )
    assert iid / trials >= 0.92 and covered / trials >= 0.92
    assert inflation(clustered[0], 0.99) > 3 > inflation([rng.expovariate(1) for _ in range(1200)], 0.99)


def test_a_step_close_to_its_bound_waits_for_three_parts() -> None:
    rng = random.Random(3)
    near = [[rng.uniform(0.1, 0.3) for _ in range(2000)]]  # its P99 ~0.3, within a factor 2 of 0.5
    low, high, _ = quantile_interval(near, 0.99, 0.5)
    assert (low, high) == (-math.inf, math.inf)
    parts = [[rng.uniform(0.1, 0.3) for _ in range(700)] for _ in range(3)]
    low, high, _ = quantile_interval(parts, 0.99, 0.5)
    assert low <= 0.298 <= high < 0.5  # the P99 of uniform(0.1, 0.3) is 0.298


@pytest.mark.slow
def test_welch_on_the_parts_keeps_its_false_positive_rate_where_requests_one_by_one_do_not() -> None:
    rng = random.Random(11)
    pairs, by_parts, by_requests = 60, 0, 0
    for _ in range(pairs):
        # Two identical clustered processes, each measured in four independent parts.
        a = [_ar1(300, 0.9, rng) for _ in range(4)]
        b = [_ar1(300, 0.9, rng) for _ in range(4)]
        low, _, _ = stats.welch_lower(stats.part_logs(a, 0.9, 3.0), stats.part_logs(b, 0.9, 3.0), 0.05)
        by_parts += low > 0
        # The same pair, its requests taken as independent: a bootstrap of each side's pooled P90.
        pooled_a, pooled_b = [v for p in a for v in p], [v for p in b for v in p]
        diffs = sorted(
            stats.point([rng.choice(pooled_b) for _ in pooled_b], 0.9)
            - stats.point([rng.choice(pooled_a) for _ in pooled_a], 0.9)
            for _ in range(100)
        )
        by_requests += diffs[5] > 0  # the one-sided 5 % bound
    print(
        f"\nfalse positives in {pairs} identical pairs: parts {by_parts}, requests one by one {by_requests}"
    )
    assert by_parts <= 0.08 * pairs < by_requests
