"""`servescope capacity run --url` over HTTP against the mock engine in its own process.

The mock has 4 slots, 20 ms to the first token and 5 ms per further token, 10 output tokens: a request
holds a slot ~65 ms, so it serves ~60 req/s at most and queues beyond. The knee under a 250 ms P99 TTFT
must lie below that saturation rate and above the rates it serves without queueing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from servescope.capacity.cli import app
from servescope.capacity.runners import HttpOptions, checked_http_runner
from servescope.capacity.search import SearchPlan, find_knee
from servescope.capacity.steps import Slo
from servescope.load.calibrate import mock_process
from servescope.load.mock_server import MockConfig
from servescope.load.validity import ValidityRules
from servescope.load.workload import Workload

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def mock() -> Iterator[str]:
    with mock_process(MockConfig(slots=4, ttft_s=0.02, token_s=0.005)) as served:
        yield served.base_url


def test_the_knee_over_http_lies_below_the_mocks_saturation(mock: str) -> None:
    plan = SearchPlan(
        (Slo("ttft", 0.25),), duration_s=2.0, start_qps=4.0, max_qps=256.0, min_requests=0, max_parts=2
    )
    options = HttpOptions(workload=Workload("random", 16, 10), rules=ValidityRules(max_lag_p99_s=0.1))
    knee = find_knee(checked_http_runner(mock, options), plan)
    assert knee.status == "measured", knee.message
    assert 4.0 <= (knee.estimate or 0) <= 128.0 and knee.upper <= 128.0, knee
    assert any(not step.meets for step in knee.steps), "the search never saw a step miss the SLO"


def test_the_command_reports_the_knee_of_a_url(mock: str) -> None:
    args = ["run", "--url", mock, "--duration", "1.5", "--start-qps", "8", "--min-requests", "0"]
    args += ["--max-parts", "2", "--max-qps", "256", "--slo", "ttft:0.25", "--max-lag", "0.1"]
    args += ["--prompt-tokens", "16", "--output-tokens", "10", "--warmup", "1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 3), result.output  # 3: the shared machine starved the client (said so)
    assert "Capacity of baseline" in result.output
    assert "client ceiling" in result.output, "the client's ceiling is measured before the first step"
