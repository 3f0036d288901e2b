"""A slow but healthy engine holds many requests at once (Little's law: rate x latency). A client whose
in-flight cap binds sends late and reads the engine's latency as its own schedule lag; the endpoint
runner of `capacity` and `tune` bounds in-flight requests by their deadlines instead, so it does not."""

from __future__ import annotations

import pytest

from servescope.kit.load.client import RequestSpec
from servescope.kit.load.endpoint import EndpointStepRunner
from servescope.kit.load.records import RequestRecord
from servescope.kit.load.runner import MAX_IN_FLIGHT, MIN_IN_FLIGHT, HttpStepRunner
from servescope.kit.load.workload import Workload
from servescope_sim.mock_process import mock_process
from servescope_sim.mock_server import MockConfig

# 0.2 s a token, 32 tokens: about 6.2 s a request; at 60 req/s about 370 are in flight, past a cap of 256
# from the fifth second of an 8-second step.
RATE, SECONDS, OUTPUT_TOKENS = 60.0, 8.0, 32
SLOW_ENGINE = MockConfig(slots=10_000, ttft_s=0.01, token_s=0.2)
WORKLOAD = Workload(prompt_tokens=8, output_tokens=OUTPUT_TOKENS)


def _most_in_flight(records: list[RequestRecord]) -> int:
    """The most requests sent and not yet answered at any instant, from their send and end times."""
    events = sorted(
        [(r.sent_s, 1) for r in records if r.sent_s is not None]
        + [(r.done_s, -1) for r in records if r.sent_s is not None and r.done_s is not None]
    )
    most = count = 0
    for _, change in events:
        count += change
        most = max(most, count)
    return most


def test_the_cap_is_the_configured_one_or_what_the_deadlines_allow() -> None:
    spec = RequestSpec("http://127.0.0.1:9", "m", timeout_s=20.0)
    assert HttpStepRunner(spec).in_flight_cap(176.0) == 256
    unbounded = HttpStepRunner(spec, max_in_flight=None)
    assert unbounded.in_flight_cap(176.0) == 3696  # 176 req/s x (20 s + 1 s)
    assert unbounded.in_flight_cap(1.0) == MIN_IN_FLIGHT
    assert unbounded.in_flight_cap(10_000.0) == MAX_IN_FLIGHT


@pytest.mark.e2e
@pytest.mark.slow
def test_a_slow_healthy_engine_is_not_client_lag_for_the_endpoint_runner() -> None:
    with mock_process(SLOW_ENGINE) as engine:
        capped = HttpStepRunner(RequestSpec(engine.base_url, "mock", timeout_s=20.0), WORKLOAD)
        held = capped.run_step(RATE, SECONDS, seed=1)
        endpoint = EndpointStepRunner(engine.base_url, workload=WORKLOAD, timeout_s=20.0)
        free = endpoint.run_step(RATE, SECONDS, seed=1)
    most_held, most_free = _most_in_flight(held.records), _most_in_flight(free.records)
    print(
        f"\ncap 256: lag p99 {held.schedule_lag_p99_s:.2f} s, most in flight {most_held}; endpoint "
        f"runner: lag p99 {free.schedule_lag_p99_s:.3f} s, most in flight {most_free}"
    )
    # The cap held sends back for as long as the engine's latency: the lag a step is judged by.
    assert most_held <= 256 and held.schedule_lag_p99_s > 1.0
    assert held.fault == "client"
    # The endpoint runner let the engine hold what it held.
    assert most_free > 300
