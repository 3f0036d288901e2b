"""`servescope capacity run --url` over HTTP against the mock engine in its own process.

The mock has 4 slots, 20 ms to the first token and 5 ms per further token, 10 output tokens: a request
holds a slot ~65 ms, so it serves ~60 req/s at most and queues beyond. The knee under a 250 ms P99 TTFT
must lie below that saturation rate and above the rates it serves without queueing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from servescope.kit.capacity.cli import app
from servescope.kit.capacity.runners import checked_http_runner
from servescope.kit.capacity.search import SearchPlan, find_knee
from servescope.kit.capacity.steps import Slo
from servescope_sim.mock_process import mock_process
from servescope_sim.mock_server import MockConfig

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def mock() -> Iterator[str]:
    with mock_process(MockConfig(slots=4, ttft_s=0.02, token_s=0.005)) as served:
        yield served.base_url


def test_the_knee_over_http_lies_below_the_mocks_saturation(mock: str) -> None:
    plan = SearchPlan((Slo("ttft", 0.25),), duration_s=2.0, repeats=1, start_qps=4.0, max_qps=256.0)
    knee = find_knee(checked_http_runner(mock), plan)
    assert 4.0 <= knee.lower <= knee.upper <= 128.0, knee
    assert not knee.reached_max
    assert any(not step.meets for step in knee.steps), "the search never saw a step miss the SLO"


def test_the_command_reports_the_knee_of_a_url(mock: str) -> None:
    args = ["run", "--url", mock, "--duration", "1.5", "--repeats", "1", "--start-qps", "8"]
    result = CliRunner().invoke(app, [*args, "--max-qps", "256", "--slo", "ttft:0.25"])
    assert result.exit_code == 0, result.output
    assert "Capacity of baseline" in result.output
