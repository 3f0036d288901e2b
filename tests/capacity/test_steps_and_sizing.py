"""Judging one step (SLOs, goodput, backlog), fleet sizing with a buffer, and the TTFT cross-check."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from servescope.kit.capacity.powered import merge
from servescope.kit.capacity.sizing import cross_check, provision
from servescope.kit.capacity.steps import Slo, latency_quantile, summarise
from servescope.kit.load.records import ClientCost, EngineSample, RequestRecord, StepResult
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


def test_the_runners_verdict_comes_first_then_the_quantile_interval() -> None:
    slos = (Slo("ttft", 0.5),)
    steady = tuple(_request(i * 0.02, 0.1, 1.0) for i in range(2000))
    passed = summarise(StepResult("open", 50.0, 40.0, steady), slos, seed=0)
    assert passed.verdict == "pass" and passed.meets and passed.intervals["p99_ttft"][1] <= 0.5
    slow = tuple(_request(i * 0.02, 1.2, 1.5) for i in range(2000))
    assert summarise(StepResult("open", 50.0, 40.0, slow), slos, seed=0).verdict == "miss"
    # Within a factor 2 of the bound one part decides nothing: three parts, and their spread, do.
    near = tuple(_request(i * 0.02, 0.4, 1.0) for i in range(2000))
    assert summarise(StepResult("open", 50.0, 40.0, near), slos, seed=0).verdict == "undecided"
    thirds = StepResult("open", 50.0, 40.0, near, parts=(700, 700, 600))
    assert summarise(thirds, slos, seed=0).verdict == "pass"
    # Few requests near the bound: the interval cannot exclude it, whatever the point estimate says.
    few = tuple(_request(i * 0.1, 0.3, 1.0) for i in range(50))
    undecided = summarise(StepResult("open", 10.0, 5.0, few), slos, seed=0)
    assert undecided.verdict == "undecided" and undecided.meets
    overloaded = StepResult("open", 50.0, 40.0, steady, invalid_reason="backlog", fault="overload")
    assert summarise(overloaded, slos, seed=0).verdict == "miss"
    for fault, verdict in (("client", "client_bound"), ("engine", "engine_failed")):
        step = StepResult("open", 50.0, 40.0, steady, invalid_reason="x", fault=fault)  # type: ignore[arg-type]
        judged = summarise(step, slos, seed=0)
        assert judged.verdict == verdict and not judged.meets


def test_a_step_keeps_how_busy_the_clients_machine_was_the_highest_of_its_parts() -> None:
    records = [_request(i * 0.1, 0.1, 1.0) for i in range(50)]
    quiet, busy = (
        replace(_step(records), client=ClientCost(0.05, 10.0, 50, pressure)) for pressure in (3.0, 41.0)
    )
    assert summarise(quiet, (Slo("ttft", 0.5),), seed=0).cpu_pressure == 3.0
    assert summarise(merge(quiet, busy), (Slo("ttft", 0.5),), seed=0).cpu_pressure == 41.0
    assert summarise(_step(records), (Slo("ttft", 0.5),), seed=0).cpu_pressure is None  # not measured


def test_itl_is_taken_per_chunk_and_tpot_per_request() -> None:
    one = RequestRecord(0.0, 0.0, 0.1, 0.5, 10, 5, None, (0.05, 0.05, 0.05, 0.25))
    step = StepResult("open", 1.0, 1.0, (one,) * 100)
    summary = summarise(step, (Slo("itl", 0.2), Slo("tpot", 0.2)), seed=0)
    assert summary.percentiles["p50_itl"] == pytest.approx(0.05)  # three of every four gaps
    assert summary.percentiles["p99_itl"] == pytest.approx(0.25)
    assert summary.percentiles["p99_tpot"] == pytest.approx(0.1)  # (0.5 - 0.1) / 4
    assert not summary.meets  # one gap in four is over 200 ms


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
