"""Bootstrap intervals and the Mann-Whitney rank test against values worked out by hand."""

from __future__ import annotations

import random
import statistics

import pytest

from servescope.kit.capacity.stats import Bootstrap, mann_whitney_greater


def test_rank_test_matches_the_normal_approximation_worked_by_hand() -> None:
    # U_B = 25 of 25, mean 12.5, sd sqrt(25 * 11 / 12) = 4.787; z = (25 - 12.5 - 0.5) / 4.787 = 2.507.
    assert mann_whitney_greater([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(0.00609, abs=2e-4)
    assert mann_whitney_greater([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]) > 0.99


def test_rank_test_is_not_significant_between_draws_of_one_distribution() -> None:
    rng = random.Random(3)
    a = [rng.lognormvariate(0, 0.5) for _ in range(400)]
    b = [rng.lognormvariate(0, 0.5) for _ in range(400)]
    assert mann_whitney_greater(a, b) > 0.05
    shifted = [value * 1.2 for value in b]
    assert mann_whitney_greater(a, shifted) < 0.001


def test_ties_are_ranked_by_their_average() -> None:
    assert mann_whitney_greater([1, 1, 1], [1, 1, 1]) == 1.0  # no spread at all: no evidence


def test_bootstrap_interval_covers_the_statistic_and_narrows_with_more_data() -> None:
    rng = random.Random(5)
    small = [rng.gauss(10, 2) for _ in range(30)]
    large = [rng.gauss(10, 2) for _ in range(600)]
    low_s, high_s = Bootstrap(resamples=400).interval(small, statistics.fmean)
    low_l, high_l = Bootstrap(resamples=400).interval(large, statistics.fmean)
    assert low_s < statistics.fmean(small) < high_s
    assert high_l - low_l < high_s - low_s
    low, high = Bootstrap(resamples=400).difference(small, [v + 5 for v in large], statistics.fmean)
    assert 3 < low < 5 < high < 7
    with pytest.raises(ValueError, match="at least one value"):
        Bootstrap().interval([], statistics.fmean)
