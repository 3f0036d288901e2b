"""The batch-size controller: its rules as a table, P99 from bucket deltas by hand and by brute force."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servescope.core.batch_controller import (
    GPU_UNDERUTILISED,
    LATENCY_OVER_SLO,
    NO_TRAFFIC,
    WITHIN_SLO,
    Recommendation,
    p99_from_deltas,
    recommend,
)

# Window: cumulative counts at the start and the end; the deltas are 50, 100, 150, 200, 200.
START = {"0.1": 10, "0.25": 20, "0.5": 30, "1": 40, "+Inf": 40}
END = {"0.1": 60, "0.25": 120, "0.5": 180, "1": 240, "+Inf": 240}


@pytest.mark.parametrize(
    ("current", "p99", "utilisation", "expected"),
    [
        # Over the 0.5 s SLO: floor(current * 0.8), never below 1.
        (10, 0.7, 0.9, Recommendation(8, LATENCY_OVER_SLO)),  # 10 * 0.8 = 8
        (16, 0.51, 0.9, Recommendation(12, LATENCY_OVER_SLO)),  # 16 * 0.8 = 12.8 -> 12
        (2, 0.7, 0.9, Recommendation(1, LATENCY_OVER_SLO)),  # 2 * 0.8 = 1.6 -> 1
        (1, 0.7, 0.9, Recommendation(1, LATENCY_OVER_SLO)),  # 0.8 -> 0, floored at 1
        # GPU under the 0.5 low threshold, latency fine: ceil(current * 1.2), capped at 256.
        (10, 0.2, 0.3, Recommendation(12, GPU_UNDERUTILISED)),  # 10 * 1.2 = 12
        (1, 0.2, 0.3, Recommendation(2, GPU_UNDERUTILISED)),  # 1.2 -> 2: rounding down would stall
        (4, 0.2, 0.3, Recommendation(5, GPU_UNDERUTILISED)),  # 4.8 -> 5
        (6, 0.2, 0.3, Recommendation(8, GPU_UNDERUTILISED)),  # 7.2 -> 8
        (250, 0.2, 0.3, Recommendation(256, GPU_UNDERUTILISED)),  # 300 -> capped at 256
        (256, 0.2, 0.3, Recommendation(256, GPU_UNDERUTILISED)),  # already at the cap
        # Both over SLO and under-used: latency wins, the batch shrinks.
        (10, 0.9, 0.1, Recommendation(8, LATENCY_OVER_SLO)),
        # At the SLO exactly is not over it; utilisation at the threshold is not under it.
        (10, 0.5, 0.5, Recommendation(10, WITHIN_SLO)),
        (10, 0.3, 0.9, Recommendation(10, WITHIN_SLO)),
        # No requests finished in the window: no latency evidence, keep.
        (10, None, 0.0, Recommendation(10, NO_TRAFFIC)),
        # A configured value above the maximum is brought within bounds.
        (300, 0.3, 0.9, Recommendation(256, WITHIN_SLO)),
        (300, 0.9, 0.9, Recommendation(204, LATENCY_OVER_SLO)),  # 256 * 0.8 = 204.8 -> 204
    ],
)
def test_rules(current: int, p99: float | None, utilisation: float, expected: Recommendation) -> None:
    assert recommend(current, p99, utilisation=utilisation) == expected


def test_thresholds_and_bounds_are_parameters() -> None:
    assert recommend(10, 0.3, utilisation=0.9, slo=0.25) == Recommendation(8, LATENCY_OVER_SLO)
    assert recommend(10, 0.1, utilisation=0.6, low_util=0.7) == Recommendation(12, GPU_UNDERUTILISED)
    assert recommend(10, 0.1, utilisation=0.1, max_seqs=11) == Recommendation(11, GPU_UNDERUTILISED)


@given(st.integers(1, 256), st.floats(0, 2), st.floats(0, 1))
def test_every_step_stays_in_bounds_and_moves_by_at_least_one(current: int, p99: float, util: float) -> None:
    step = recommend(current, p99, utilisation=util)
    assert 1 <= step.value <= 256
    if step.reason == LATENCY_OVER_SLO and current > 1:
        assert step.value <= current - 1
    if step.reason == GPU_UNDERUTILISED and current < 256:
        assert step.value >= current + 1


def test_bad_inputs_are_named() -> None:
    refusals: list[tuple[Callable[[], Recommendation], str]] = [
        (lambda: recommend(0, 0.1, utilisation=0.5), "current: expected at least 1, got 0"),
        (lambda: recommend(8, 0.1, utilisation=0.5, max_seqs=0), "max_seqs: expected at least 1, got 0"),
        (lambda: recommend(8, 0.1, utilisation=0.5, slo=0.0), "slo: expected seconds above 0"),
        (lambda: recommend(8, 0.1, utilisation=85.0), "utilisation: expected a fraction 0-1, got 85.0"),
        (lambda: recommend(8, 0.1, utilisation=0.5, low_util=-0.1), "low_util: expected a fraction 0-1"),
    ]
    for call, message in refusals:
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize(
    ("quantile", "expected"),
    [
        (0.99, 0.98),  # rank 198 in (0.5, 1]: 0.5 + 0.5 * (198 - 150) / (200 - 150)
        (0.5, 0.25),  # rank 100 in (0.1, 0.25]: 0.1 + 0.15 * (100 - 50) / (100 - 50)
        (0.25, 0.1),  # rank 50 in (0, 0.1]: 0.1 * 50 / 50
        (0.1, 0.04),  # rank 20 in (0, 0.1]: 0.1 * 20 / 50
        (0.6, 0.35),  # rank 120 in (0.25, 0.5]: 0.25 + 0.25 * (120 - 100) / (150 - 100)
    ],
)
def test_quantile_by_hand(quantile: float, expected: float) -> None:
    assert p99_from_deltas(START, END, quantile) == pytest.approx(expected)


def test_quantile_in_the_inf_bucket_reports_the_highest_finite_bound() -> None:
    # Deltas 50, 100, 150, 190, 200: rank 198 lies past 190, in +Inf.
    end = {**END, "1": 230}
    assert p99_from_deltas(START, end) == 1.0


def test_no_observations_in_the_window_is_none() -> None:
    assert p99_from_deltas(END, END) is None
    assert p99_from_deltas({}, {"0.5": 0, "+Inf": 0}) is None


def test_a_counter_reset_uses_the_end_snapshot_alone() -> None:
    # The server restarted: end is below start, so end alone is the window (5, 8, 10; rank 9.9).
    end = {"0.1": 5, "0.25": 8, "0.5": 10, "1": 10, "+Inf": 10}
    assert p99_from_deltas(START, end) == pytest.approx(0.25 + 0.25 * (9.9 - 8) / (10 - 8))


def test_a_bucket_missing_at_the_start_counts_from_zero() -> None:
    assert p99_from_deltas({}, END) == pytest.approx(0.5 + 0.5 * (237.6 - 180) / (240 - 180))


@pytest.mark.parametrize(
    ("end", "message"),
    [
        ({"0.5": 3}, r'no le="\+Inf" bucket'),
        ({"+Inf": 3}, "no finite bucket bound"),
        ({"fast": 1, "+Inf": 3}, "le='fast': not a number"),
    ],
)
def test_malformed_histograms_are_refused(end: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        p99_from_deltas({}, end)


def _observations(bounds: list[float], counts: list[int]) -> list[float]:
    """Brute force: each bucket's observations spread evenly up to its bound, +Inf ones at infinity."""
    points: list[float] = []
    lower = 0.0
    for bound, count in zip([*bounds, math.inf], counts, strict=True):
        points += [
            bound if bound == math.inf else lower + (bound - lower) * k / count for k in range(1, count + 1)
        ]
        lower = bound
    return points


@given(
    st.lists(st.floats(0.001, 100, allow_nan=False), min_size=1, max_size=8, unique=True),
    st.lists(st.integers(0, 40), min_size=9, max_size=9),
    st.lists(st.integers(0, 5), min_size=9, max_size=9),
    st.floats(0.01, 1.0),
)
def test_quantile_matches_brute_force(
    raw_bounds: list[float], window: list[int], before: list[int], quantile: float
) -> None:
    bounds = sorted(raw_bounds)
    labels = [repr(b) for b in bounds] + ["+Inf"]
    counts = window[: len(labels)]
    start = {le: float(sum(before[: i + 1])) for i, le in enumerate(labels)}
    end = {le: start[le] + sum(counts[: i + 1]) for i, le in enumerate(labels)}
    result = p99_from_deltas(start, end, quantile)
    points = _observations(bounds, counts)
    if not points:
        assert result is None
        return
    assert result is not None
    rank = math.ceil(quantile * len(points) - 1e-9)  # the observation the quantile lands on
    if points[rank - 1] == math.inf:
        assert result == bounds[-1]
        return
    previous = points[rank - 2] if rank >= 2 else 0.0
    assert previous - 1e-9 <= result <= points[rank - 1] + 1e-9
    if quantile * len(points) == rank:  # a whole rank lands exactly on an observation
        assert result == pytest.approx(points[rank - 1])
