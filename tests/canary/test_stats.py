"""The tests of `canary analyze` against exact answers: brute force over every pair, every arrangement of
the pooled sample, and exact tail sums."""

from __future__ import annotations

import itertools
import math
import random
from statistics import pvariance

import pytest

from servescope.kit.canary.histograms import Histogram, common
from servescope.kit.canary.stats import binomial_greater, fisher_greater, mann_whitney, normal_sf


def expand(counts: list[int]) -> list[int]:
    """Per-bucket counts as one value per observation: its bucket's index (the ties)."""
    return [i for i, n in enumerate(counts) for _ in range(n)]


def brute_u(a: list[int], b: list[int]) -> float:
    return sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)


@pytest.mark.parametrize("seed", range(5))
def test_u_and_its_effect_size_are_those_of_every_pair(seed: int) -> None:
    draw = random.Random(seed)
    canary = [draw.randrange(0, 6) for _ in range(7)]
    stable = [draw.randrange(0, 9) for _ in range(7)]
    test = mann_whitney(canary, stable)
    u = brute_u(expand(canary), expand(stable))
    assert test.u == pytest.approx(u)
    assert test.effect == pytest.approx(u / (sum(canary) * sum(stable)))


def test_the_tie_corrected_variance_is_the_exact_permutation_variance() -> None:
    """Under H0 every split of the pooled sample is equally likely: U's variance over all of them is
    what the tie-corrected formula gives (here 4 + 6 observations in 3 buckets, with ties)."""
    canary, stable = [2, 1, 1], [1, 3, 2]
    pooled = expand([x + y for x, y in zip(canary, stable, strict=True)])
    n1 = sum(canary)
    us = []
    for chosen in itertools.combinations(range(len(pooled)), n1):
        a = [pooled[i] for i in chosen]
        b = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        us.append(brute_u(a, b))
    test = mann_whitney(canary, stable)
    mean = n1 * sum(stable) / 2
    assert sum(us) / len(us) == pytest.approx(mean)
    assert test.z == pytest.approx((test.u - mean) / math.sqrt(pvariance(us)))


def test_a_slower_canary_is_significant_and_an_equal_one_is_not() -> None:
    stable = [600, 280, 20, 0]
    assert mann_whitney([20, 40, 36, 4], stable).p_value < 1e-20
    assert mann_whitney([67, 31, 2, 0], stable).p_value > 0.05
    # The direction matters: a faster canary is not "worse".
    assert mann_whitney([90, 10, 0, 0], stable).p_value > 0.5


def test_weight_counts_correlated_observations_once_and_keeps_the_effect() -> None:
    canary, stable = [300, 600, 100], [3000, 6000, 800]
    plain, per_request = mann_whitney(canary, stable), mann_whitney(canary, stable, weight=30)
    assert per_request.effect == pytest.approx(plain.effect)
    assert per_request.z == pytest.approx(plain.z / math.sqrt(30), rel=0.01)


def hypergeometric_tail(x: int, n1: int, bad: int, total: int) -> float:
    return sum(
        math.comb(bad, k) * math.comb(total - bad, n1 - k) for k in range(x, min(bad, n1) + 1)
    ) / math.comb(total, n1)


@pytest.mark.parametrize(
    ("bad_c", "n_c", "bad_s", "n_s"),
    [(3, 4, 1, 4), (0, 10, 5, 40), (5, 30, 2, 300), (1, 50, 0, 500), (12, 60, 30, 200), (40, 40, 40, 40)],
)
def test_fisher_is_the_exact_hypergeometric_tail(bad_c: int, n_c: int, bad_s: int, n_s: int) -> None:
    expected = hypergeometric_tail(bad_c, n_c, bad_c + bad_s, n_c + n_s)
    assert fisher_greater(bad_c, n_c, bad_s, n_s) == pytest.approx(expected, rel=1e-9)


def test_fisher_stays_exact_and_fast_with_large_counts() -> None:
    # 4 % of 1,000 against 0.5 % of 9,000: the z-test's normal approximation says about 1e-30.
    assert 0 < fisher_greater(40, 1000, 45, 9000) < 1e-12
    assert fisher_greater(45_000, 1_000_000, 405_000, 9_000_000) > 0.4


@pytest.mark.parametrize(
    ("k", "n", "p"), [(0, 10, 0.3), (3, 10, 0.5), (8, 10, 0.5), (5, 40, 0.02), (40, 40, 0.9)]
)
def test_binomial_tail_is_exact(k: int, n: int, p: float) -> None:
    expected = sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))
    assert binomial_greater(k, n, p) == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_normal_tail() -> None:
    assert normal_sf(0) == pytest.approx(0.5)
    assert normal_sf(1.959964) == pytest.approx(0.025, rel=1e-5)


def test_quantiles_interpolate_as_histogram_quantile_does() -> None:
    # 900 requests: 600 under 0.1 s, 885 under 0.25, all under 0.5: rank 891 -> 0.25 + 0.25 * 6 / 15.
    histogram = Histogram.from_buckets({0.1: 600, 0.25: 885, 0.5: 900, math.inf: 900})
    assert histogram.quantile(0.99) == pytest.approx(0.35)
    assert histogram.quantile(0.5) == pytest.approx(0.1 * 450 / 600)
    assert Histogram.from_buckets({0.5: 10, math.inf: 20}).quantile(0.99) == 0.5  # in +Inf: the last bound


def test_two_layouts_are_compared_on_their_common_bounds() -> None:
    vllm = Histogram.from_buckets({0.25: 50, 0.5: 90, 1.0: 99, math.inf: 100})
    sglang = Histogram.from_buckets({0.4: 40, 0.5: 80, 0.6: 90, 1.0: 100, math.inf: 100})
    a, b = common(vllm, sglang)
    assert a.bounds == b.bounds == (0.5, 1.0, math.inf)
    assert a.counts() == [90, 9, 1] and b.counts() == [80, 20, 0]
    # increase() can dip a bucket below the one under it by rounding: counts never go negative.
    assert Histogram.from_buckets({0.1: 10.2, 0.25: 10.1, math.inf: 12}).counts() == pytest.approx(
        [10.2, 0, 1.8]
    )
