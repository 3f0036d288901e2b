"""Judging one step (SLOs, goodput, backlog), fleet sizing with a buffer, and the TTFT cross-check."""

from __future__ import annotations

import math

import pytest

from servescope.kit.capacity.sizing import cross_check, provision
from servescope.kit.capacity.steps import Slo, backlog_reason, latency_quantile, summarise
from servescope.kit.load.records import EngineSample, RequestRecord, StepResult
from servescope.kit.load.validity import bucket_bounds, percentile


def _request(at: float, ttft: float, e2e: float, tokens: int = 10) -> RequestRecord:
    return RequestRecord(at, at, at + ttft, at + e2e, prompt_tokens=100, output_tokens=tokens)


def _step(
    records: list[RequestRecord], waiting: list[float] | None = None, duration: float = 10.0
) -> StepResult:
    samples = tuple(EngineSample(i * 0.5, 4.0, w) for i, w in enumerate(waiting or [0.0] * 20))
    return StepResult("open", 10.0, duration, tuple(records), engine_samples=samples)


def test_slo_text_is_parsed_and_bad_text_named() -> None:
    assert Slo.parse("e2e:2.5") == Slo("e2e", 2.5)
    for bad, why in (
        ("ttfb:1", "metric must be one of"),
        ("ttft:fast", "must be seconds"),
        ("ttft:0", "> 0"),
    ):
        with pytest.raises(ValueError, match=why) as err:
            Slo.parse(bad)
        assert repr(bad) in str(err.value)


def test_nearest_rank_quantile_keeps_a_never_finished_request_infinite() -> None:
    assert latency_quantile([0.1, 0.2, 0.3, 0.4], 0.5) == 0.2
    assert latency_quantile([0.1] * 99 + [math.inf], 0.99) == 0.1
    assert latency_quantile([0.1] * 98 + [math.inf] * 2, 0.99) == math.inf
    assert math.isnan(latency_quantile([], 0.99))


def test_capacity_quantile_is_nearest_rank_where_interpolation_would_lose_the_tail() -> None:
    # 100 latencies, the slowest never finished: the p99 rank is a finished request's 0.1 s.
    latencies = [0.1] * 99 + [math.inf]
    assert latency_quantile(latencies, 0.99) == percentile(latencies, 0.99, method="nearest-rank") == 0.1
    assert percentile(latencies, 0.99) == math.inf  # interpolated: pulled to the unfinished one
    between_two_unfinished = percentile([0.1, math.inf, math.inf], 0.75)  # inf - inf: NaN
    assert between_two_unfinished is not None and math.isnan(between_two_unfinished)
    assert latency_quantile([0.1, math.inf, math.inf], 0.75) == math.inf


def test_goodput_counts_requests_meeting_every_slo_at_once() -> None:
    records = [_request(i * 0.1, 0.1, 1.0) for i in range(60)] + [
        _request(i * 0.1, 0.1, 5.0) for i in range(40)
    ]
    slos = (Slo("ttft", 0.5), Slo("e2e", 2.0))
    summary = summarise(_step(records), slos, seed=0)
    assert summary.goodput == pytest.approx(6.0)  # 60 good requests over 10 s
    assert not summary.meets  # 40 % miss e2e: p99 e2e 5 s
    assert summarise(_step(records), slos[:1], seed=0).meets


def test_a_growing_queue_or_rising_latency_is_backlog() -> None:
    steady = [_request(i * 0.1, 0.2, 1.0) for i in range(100)]
    assert backlog_reason(_step(steady)) is None
    growing = _step(steady, waiting=[float(i * 2) for i in range(20)])
    assert "waiting queue grew by" in (backlog_reason(growing) or "")
    rising = [_request(i * 0.1, 0.2 + 0.05 * i, 10.0) for i in range(100)]
    assert "median TTFT rose" in (backlog_reason(_step(rising)) or "")
    lost = [*steady, *(RequestRecord(5.0, 5.0, None, None, error="timeout") for _ in range(5))]
    assert "never finished" in (backlog_reason(_step(lost)) or "")


def test_provisioning_loads_each_replica_to_80_percent_of_the_knee_lower_bound() -> None:
    sized = provision(100.0, 15.0, gpus_per_replica=8)
    assert sized.per_replica_qps == pytest.approx(12.0)
    assert (sized.replicas, sized.gpus) == (9, 72)  # 100 / 12 = 8.3 -> 9
    assert provision(96.0, 15.0).replicas == 8  # exactly 8 x 12
    with pytest.raises(ValueError, match="lower bound must be > 0"):
        provision(10.0, 0.0)


def test_cross_check_finds_the_bucket_of_the_engine_p99() -> None:
    buckets = ((0.1, 50.0), (0.25, 90.0), (0.5, 99.0), (1.0, 100.0), (math.inf, 100.0))
    assert bucket_bounds(buckets, 0.99) == (0.25, 0.5)
    records = [_request(i * 0.1, 0.05, 1.0) for i in range(89)] + [_request(0, 0.3, 1.0) for _ in range(11)]
    agreeing = StepResult("open", 10.0, 10.0, tuple(records), engine_ttft_buckets=buckets)
    check = cross_check(agreeing)
    assert check is not None and check.agrees and check.client_p99 == pytest.approx(0.3)
    fast = StepResult("open", 10.0, 10.0, tuple(records[:89]), engine_ttft_buckets=buckets)
    assert cross_check(fast) is not None and not cross_check(fast).agrees  # type: ignore[union-attr]
    assert cross_check(StepResult("open", 10.0, 10.0, tuple(records))) is None


def test_cross_check_allows_for_the_path_measured_from_the_means() -> None:
    # The engine's P99 is in (0.25, 0.5]; every client TTFT is 0.6 s, and the engine's mean is 0.3 s:
    # the 0.3 s between the means is the path the engine's clock leaves out, so 0.6 s agrees.
    buckets = ((0.25, 0.0), (0.5, 100.0), (math.inf, 100.0))
    records = tuple(_request(i * 0.1, 0.6, 1.0) for i in range(100))
    slow_path = StepResult("open", 10.0, 10.0, records, engine_ttft_buckets=buckets, engine_ttft_mean_s=0.3)
    check = cross_check(slow_path)
    assert check is not None and check.agrees and check.path_s == pytest.approx(0.3)
    unknown_path = StepResult("open", 10.0, 10.0, records, engine_ttft_buckets=buckets)
    assert cross_check(unknown_path) is not None and not cross_check(unknown_path).agrees  # type: ignore[union-attr]
