"""The HTTP runner against the mock server in its own process: validity, backlog, the cap, errors.

The mock has 4 slots, 20 ms to the first token and 5 ms per further token; with 10 output tokens a
request holds a slot about 65 ms, so its capacity is about 60 req/s.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from servescope.kit.load.client import RequestSpec
from servescope.kit.load.engine_metrics import metrics_url
from servescope.kit.load.records import StepResult, StepRunner
from servescope.kit.load.runner import HttpStepRunner
from servescope.kit.load.scaleout import LocustPlan, LocustStepRunner, run_locust
from servescope.kit.load.schedule import LengthDistribution, arrival_times
from servescope.kit.load.validity import ValidityRules, bucket_bounds, percentile
from servescope_sim.mock_process import mock_process
from servescope_sim.mock_server import MockConfig

pytestmark = pytest.mark.e2e
SHAPES = LengthDistribution(16, 10)


@pytest.fixture(scope="module")
def mock() -> Iterator[str]:
    with mock_process(MockConfig(slots=4, ttft_s=0.02, token_s=0.005)) as served:
        yield served.base_url


def test_the_http_runner_is_a_step_runner() -> None:
    runner: StepRunner = HttpStepRunner(RequestSpec("http://127.0.0.1:9", "mock"))
    assert callable(runner.run_step)


def runner(base: str, **options: object) -> HttpStepRunner:
    spec_options = {k: options.pop(k) for k in ("api", "stream", "timeout_s") if k in options}
    return HttpStepRunner(
        RequestSpec(base, "mock", **spec_options),  # type: ignore[arg-type]
        SHAPES,
        engine_metrics_url=metrics_url(base),
        **options,  # type: ignore[arg-type]
    )


def p99_ttft(result: StepResult) -> float:
    value = percentile([r.ttft_s for r in result.records if r.ttft_s is not None], 0.99)
    assert value is not None
    return value


@pytest.mark.parametrize(("api", "stream"), [("completions", True), ("chat", True), ("chat", False)])
def test_below_capacity_every_request_is_sent_answered_and_checked_against_the_engine(
    mock: str, api: str, stream: bool
) -> None:
    # The records are the subject: every scheduled request sent once and answered, its tokens counted,
    # the engine sampled. Whether such a step is valid at the default rules depends on free cores (a
    # starved client sends late, which the rules rightly reject): bench/load_client.py measures that.
    result = runner(mock, api=api, stream=stream).run_step(15.0, 3.0, seed=1)
    assert len(result.records) == len(arrival_times(15.0, 3.0, seed=1)) > 20
    assert all(r.ok for r in result.records), {r.error for r in result.records}
    assert {r.output_tokens for r in result.records} == {10}
    assert result.engine_samples, "the engine's /metrics were sampled over the step"
    assert "open loop" in result.notes[0]
    if stream:
        # The engine's histogram counts from its arrival, the client from its send: the client's P99
        # TTFT from the send is at least the lower bound of the engine's P99 bucket, however busy the
        # machine.
        bounds = bucket_bounds(result.engine_ttft_buckets, 0.99)
        assert bounds is not None
        service = percentile([r.service_ttft_s or 0.0 for r in result.records], 0.99) or 0.0
        assert service >= bounds[0], (service, bounds)


def test_overload_is_detected_and_closed_loop_hides_it(mock: str) -> None:
    # Twice the mock's capacity is never a result. Sent on schedule, it grows the engine's queue, which
    # the open loop reports as a backlog and the closed loop, sending only as the engine answers, cannot
    # see. On a machine so busy that the client could not send on schedule (seen at a load of 15: a
    # third of the rate sent), the engine never saw the overload and the client's lag is the reason.
    # How much lower the closed loop's P99 is (coordinated omission) is measured by
    # bench/load_client.py, and on the simulated engine's clock by tests/capacity/test_acceptance.py.
    overloaded = runner(mock, rules=ValidityRules(max_lag_p99_s=1.0)).run_step(120.0, 3.0, seed=2)
    closed = runner(mock, mode="closed").run_step(8, 3.0, seed=2)
    open_ms, closed_ms = p99_ttft(overloaded) * 1000, p99_ttft(closed) * 1000
    print(f"\nopen loop P99 TTFT {open_ms:.0f} ms, closed {closed_ms:.0f} ms: {overloaded.invalid_reason}")
    reason = overloaded.invalid_reason or ""
    assert not overloaded.valid
    if "could not keep the schedule" not in reason:
        assert "backlog" in reason, reason
    assert closed.valid and closed.mode == "closed"
    assert all(r.ok for r in closed.records)


def test_the_in_flight_cap_shows_as_schedule_lag_not_drops(mock: str) -> None:
    result = runner(mock, max_in_flight=1, rules=ValidityRules(check_backlog=False)).run_step(
        30.0, 1.0, seed=3
    )
    assert not result.valid and "scheduling lag" in (result.invalid_reason or "")
    assert result.schedule_lag_p99_s > 0.2
    sent = [r for r in result.records if r.sent_s is not None]
    assert len(sent) == len(result.records), "every scheduled request is sent (late), none dropped"


def test_errors_are_recorded_by_reason(mock: str) -> None:
    slow = runner(mock, timeout_s=0.05, rules=ValidityRules(check_backlog=False)).run_step(10.0, 1.0, seed=4)
    assert {r.error for r in slow.records} == {"timeout"}
    missing = runner(mock + "/nowhere").run_step(10.0, 1.0, seed=4)
    assert {r.error for r in missing.records} == {"http_404"}
    closed_port = runner("http://127.0.0.1:9").run_step(10.0, 1.0, seed=4)
    assert {r.error for r in closed_port.records} == {"connect"}


@pytest.mark.slow
def test_locust_master_and_two_workers_split_one_schedule() -> None:
    # The schedule is the subject: the workers send its requests between them, each once. That they
    # keep a schedule one process cannot needs free cores, and is measured by bench/load_client.py.
    rate, duration = 20.0, 3.0
    with mock_process(MockConfig(slots=10_000, ttft_s=0.005, token_s=0.002)) as fast:
        plan = LocustPlan(
            fast.base_url, "mock", rate, duration, workers=2, seed=5, workload=LengthDistribution(16, 8)
        )
        spread = run_locust(plan)
    print(f"\nLocust + 2 workers at {rate:.0f} req/s: {spread.invalid_reason or 'valid'}; {spread.notes[1]}")
    assert spread.notes[0].endswith("Locust master + 2 workers")
    assert len(spread.records) == len(arrival_times(rate, duration, seed=5)), "the workers split one schedule"
    assert all(r.ok for r in spread.records) and {r.output_tokens for r in spread.records} == {8}
    assert len({r.scheduled_s for r in spread.records}) == len(spread.records), "no request sent twice"


@pytest.mark.slow
def test_a_locust_step_samples_the_engine_and_its_throughput_agrees_with_the_engines_count(mock: str) -> None:
    # What capacity and tune get from `--locust-workers`: a step with the engine's queue samples (taken
    # here, on a thread of their own) and a throughput within 5 % of the engine's own token counter,
    # both read over the same requests whether or not a busy machine let the workers keep the schedule.
    plan = LocustPlan(
        mock, "mock", 0.0, 0.0, workers=2, workload=SHAPES, engine_metrics_url=metrics_url(mock)
    )
    runner: StepRunner = LocustStepRunner(plan, ValidityRules(max_lag_p99_s=0.5))
    result = runner.run_step(15.0, 4.0, seed=1)
    assert result.records and all(r.ok for r in result.records)
    assert result.engine_samples, "the engine's queue was sampled during the step"
    counted = result.throughput
    assert counted is not None and counted.engine_tokens_per_s is not None
    print(f"\nLocust step: {counted.tokens_per_s:.1f} tokens/s, engine {counted.engine_tokens_per_s:.1f}")
    assert abs(counted.tokens_per_s / counted.engine_tokens_per_s - 1) <= 0.05
