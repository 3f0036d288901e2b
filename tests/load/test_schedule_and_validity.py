"""Schedules, percentiles and the validity rules, on fixed inputs (no network)."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

import pytest

from servescope.kit.load.engine_metrics import bucket_delta, parse_page
from servescope.kit.load.records import EngineSample, RequestRecord
from servescope.kit.load.schedule import LengthDistribution, arrival_times, read_shapes, split_schedule
from servescope.kit.load.validity import (
    EngineView,
    ValidityRules,
    bucket_bounds,
    ceiling_reason,
    client_reason,
    client_step,
    judge,
    percentile,
    queue_growth,
    service_backlog,
)


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


def test_constant_schedule_is_evenly_spaced() -> None:
    times = arrival_times(4.0, 2.0, arrival="constant")
    assert times == [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]


def test_poisson_schedule_has_the_rate_and_exponential_gaps() -> None:
    times = arrival_times(50.0, 200.0, arrival="poisson", seed=3)
    assert len(times) == pytest.approx(10_000, rel=0.03)
    spacing = gaps(times)
    assert statistics.stdev(spacing) / statistics.mean(spacing) == pytest.approx(1.0, abs=0.05)
    assert times == arrival_times(50.0, 200.0, arrival="poisson", seed=3), "same seed, same schedule"
    assert times != arrival_times(50.0, 200.0, arrival="poisson", seed=4)


@pytest.mark.parametrize("cv", [0.5, 2.0, 4.0])
def test_gamma_schedule_has_the_asked_burstiness(cv: float) -> None:
    times = arrival_times(50.0, 400.0, arrival="gamma", cv=cv, seed=1)
    spacing = gaps(times)
    assert len(times) == pytest.approx(20_000, rel=0.1)
    assert statistics.stdev(spacing) / statistics.mean(spacing) == pytest.approx(cv, rel=0.1)


def test_schedule_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="positive"):
        arrival_times(0.0, 10.0)
    with pytest.raises(ValueError, match="exceeds"):
        arrival_times(1e6, 10.0)
    with pytest.raises(ValueError, match="arrival"):
        arrival_times(1.0, 10.0, arrival="uniform")  # type: ignore[arg-type]


def test_split_schedule_shares_interleave_and_cover_it() -> None:
    times = arrival_times(10.0, 3.0, arrival="constant")
    shares = [split_schedule(times, 3, i) for i in range(3)]
    assert sorted(t for share in shares for t in share) == times
    assert all(abs(len(s) - len(times) / 3) <= 1 for s in shares)
    with pytest.raises(ValueError, match="outside"):
        split_schedule(times, 3, 3)


def test_lengths_spread_within_bounds() -> None:
    shapes = LengthDistribution(100, 20, spread=0.5).sample(500, seed=1)
    assert {50 <= s.prompt_tokens <= 150 and 10 <= s.output_tokens <= 30 for s in shapes} == {True}
    assert len({s.prompt_tokens for s in shapes}) > 50


def test_shapes_file_counts_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "shapes.jsonl"
    good = [{"prompt_tokens": 10, "output_tokens": 5}, {"prompt_tokens": 200, "output_tokens": 50}]
    path.write_text(
        "\n".join(
            [
                *map(json.dumps, good),
                "not json",
                '{"prompt_tokens": -1, "output_tokens": 2}',
                '{"prompt_tokens": true, "output_tokens": 2}',
                "[1]",
            ]
        )
        + "\n"
    )
    shapes, bad = read_shapes(path)
    assert bad == 4
    assert {(s.prompt_tokens, s.output_tokens) for s in shapes.sample(100, seed=0)} == {(10, 5), (200, 50)}
    path.write_text("nothing\n")
    with pytest.raises(ValueError, match=r"shapes\.jsonl"):
        read_shapes(path)


def test_percentile_interpolates() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0], 0.99) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile(list(map(float, range(101))), 0.99) == pytest.approx(99.0)


def test_percentile_nearest_rank_returns_an_element() -> None:
    assert percentile([], 0.5, method="nearest-rank") is None
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5, method="nearest-rank") == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.51, method="nearest-rank") == 3.0
    assert percentile(list(map(float, range(1, 101))), 0.99, method="nearest-rank") == 99.0
    assert percentile([5.0], 0.0, method="nearest-rank") == 5.0
    with pytest.raises(ValueError, match=r"1\.5 is outside 0\.\.1"):
        percentile([1.0], 1.5, method="nearest-rank")


def test_bucket_bounds_find_the_quantile_bucket() -> None:
    buckets = [(0.1, 50.0), (0.25, 98.0), (0.5, 100.0), (float("inf"), 100.0)]
    assert bucket_bounds(buckets, 0.5) == (0.0, 0.1)
    assert bucket_bounds(buckets, 0.99) == (0.25, 0.5)
    assert bucket_bounds([], 0.99) is None


def on_time(n: int, rate: float, ttft: float = 0.02, lag: float = 0.0) -> list[RequestRecord]:
    return [
        RequestRecord(i / rate, i / rate + lag, i / rate + lag + ttft, i / rate + lag + 0.1, 10, 10)
        for i in range(n)
    ]


def test_a_kept_schedule_is_valid() -> None:
    records = on_time(100, 10.0)
    assert judge("open", records, 10.0, 10.0, ValidityRules()) == (None, None)


def test_a_lagging_client_is_the_clients_fault_for_rate_and_lag() -> None:
    records = on_time(100, 10.0, lag=0.2)  # each send 200 ms late: lag p99 over 50 ms
    fault, reason = judge("open", records, 10.0, 10.0, ValidityRules())
    assert fault == "client" and reason is not None and "scheduling lag p99 200.0 ms" in reason
    assert "remedy:" in reason
    late = [*on_time(90, 10.0), *(RequestRecord(9 + i / 10, 12.0, 12.1, 12.2) for i in range(10))]
    reason = client_reason(late, 10.0, 10.0, ValidityRules(max_lag_p99_s=100.0))
    assert reason is not None and "below 98%" in reason


def test_a_growing_backlog_is_the_engines_overload() -> None:
    growing = [EngineSample(float(t), 4.0, 2.0 * t) for t in range(10)]
    assert "waiting queue grew" in (queue_growth([], growing) or "")
    steady = [EngineSample(float(t), 4.0, 1.0 + (t % 2)) for t in range(10)]
    assert queue_growth(on_time(100, 10.0), steady) is None
    slower = [
        RequestRecord(i / 10, i / 10, i / 10 + 0.02 + i * 0.01, i / 10 + 1.0 + i * 0.01) for i in range(100)
    ]
    assert "TTFT from the send grew" in (service_backlog(slower) or "")
    assert judge("open", slower, 10.0, 10.0, ValidityRules())[0] == "overload"
    # The engine's queue grew while the client also lagged: the engine is at fault (it was sent less).
    fault, _ = judge("open", on_time(100, 10.0, lag=0.2), 10.0, 10.0, ValidityRules(), samples=growing)
    assert fault == "overload"


def test_a_client_that_falls_behind_is_no_backlog_where_the_engine_kept_up() -> None:
    # Each send later than the last: TTFT from the schedule grows, from the send it does not. With the
    # engine's queue sampled flat, or without samples, this is the client's fault, never an overload.
    behind = [
        RequestRecord(i / 10, i / 10 + i * 0.01, i / 10 + i * 0.01 + 0.02, i / 10 + i * 0.01 + 0.1)
        for i in range(100)
    ]
    flat = [EngineSample(float(t), 2.0, 0.0) for t in range(10)]
    for samples in (flat, []):
        fault, reason = judge("open", behind, 10.0, 10.0, ValidityRules(), samples=samples)
        assert fault == "client" and "scheduling lag" in (reason or ""), (samples, reason)


def test_a_step_where_most_requests_fail_is_the_engines_failure() -> None:
    failed = [RequestRecord(i / 10, i / 10, None, None, 10, 0, "http_400") for i in range(60)]
    fault, reason = judge("open", [*failed, *on_time(40, 10.0)], 10.0, 10.0, ValidityRules())
    assert fault == "engine" and "60 of 100 requests failed (http_400 x60)" in (reason or "")
    # A few failures are latency (infinite), not a failed step.
    assert judge("open", [*failed[:5], *on_time(95, 10.0)], 10.0, 10.0, ValidityRules())[0] is None
    # Requests never answered are the engine's backlog, when the client kept its schedule.
    timeouts = [RequestRecord(i / 10, i / 10, None, None, 10, 0, "timeout") for i in range(5)]
    assert judge("open", [*timeouts, *on_time(95, 10.0)], 10.0, 10.0, ValidityRules())[0] == "overload"


def test_a_starved_client_s_timeouts_are_the_client_s_not_the_engine_s() -> None:
    # A client 2 s behind its schedule reads its answers late too: the engine's queue stayed flat, so
    # the requests it never saw answered say nothing about the engine.
    timeouts = [RequestRecord(i / 10, i / 10 + 2.0, None, None, 10, 0, "timeout") for i in range(5)]
    flat = [EngineSample(float(t), 2.0, 0.0) for t in range(10)]
    fault, reason = judge(
        "open", [*timeouts, *on_time(95, 10.0, lag=2.0)], 10.0, 10.0, ValidityRules(), samples=flat
    )
    assert fault == "client" and "scheduling lag" in (reason or ""), reason


def test_results_near_the_client_ceiling_are_refused() -> None:
    records = on_time(100, 10.0)
    assert ceiling_reason(records, 10.0, 20.0) is None
    assert "ceiling" in (ceiling_reason(records, 10.0, 12.0) or "")
    assert ceiling_reason(records, 10.0, 0.0) is None


def test_client_step_orders_records_and_judges_open_loop_only_by_every_rule() -> None:
    lagging = on_time(100, 10.0, lag=0.2)
    engine = EngineView(ttft_buckets=((0.1, 7.0), (float("inf"), 9.0)), ttft_mean_s=0.2)
    step = client_step("open", 10.0, 10.0, reversed(lagging), ValidityRules(), engine=engine, notes=["n"])
    assert step.records == tuple(lagging) and step.notes == ("n",)
    assert step.schedule_lag_p99_s == pytest.approx(0.2)
    assert step.engine_ttft_buckets == engine.ttft_buckets and step.engine_ttft_mean_s == 0.2
    assert step.invalid_reason is not None and "scheduling lag p99 200.0 ms" in step.invalid_reason
    assert step.status == "client_bound" and not step.valid
    closed = client_step("closed", 4.0, 10.0, lagging, ValidityRules())
    assert closed.invalid_reason is None, "the open-loop rules do not judge closed-loop clients"
    near_ceiling = client_step("closed", 4.0, 10.0, lagging, ValidityRules(client_ceiling=12.0))
    assert "ceiling" in (near_ceiling.invalid_reason or "")


PAGE = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="a"} 3
vllm:num_requests_running{model_name="b"} 1
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="a"} 5
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="a"} 7
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="a"} 9
vllm:time_to_first_token_seconds_count{model_name="a"} 9
vllm:time_to_first_token_seconds_sum{model_name="a"} 1.5
"""


def test_engine_page_and_bucket_delta() -> None:
    page = parse_page(PAGE)
    assert (page.running, page.waiting) == (4.0, 5.0)
    assert page.ttft_buckets == {0.1: 7.0, float("inf"): 9.0}
    assert (page.ttft_sum, page.ttft_count) == (1.5, 9.0)
    later = {0.1: 10.0, float("inf"): 14.0}
    assert bucket_delta(page.ttft_buckets, later) == ((0.1, 3.0), (float("inf"), 5.0))
    assert bucket_delta(later, page.ttft_buckets) == ((0.1, 7.0), (float("inf"), 9.0)), (
        "a reset counts from 0"
    )
