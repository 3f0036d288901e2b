"""A client starved of CPU reports `client_bound`, no knee, and the evidence: the step it could not drive.
The client (`servescope capacity run --url`, the operators' engine scale: P99 TTFT <= 500 ms, so a lag
bound of 50 ms) starts alone and measures its ceiling; then it is held to 5 % of a CPU, as a load
client's pod is at a CPU limit far too low: it runs 5 ms of every 100 ms and is stopped for the rest,
as the kernel's CFS quota throttles a container. The limit costs no CPU, so the engine it measures and
the rest of the machine are not starved with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from servescope_sim.mock_process import mock_process
from servescope_sim.mock_server import MockConfig
from tests.support import cpu_limited

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
CAPACITY = [sys.executable, "-m", "servescope", "capacity", "run"]
CPU_SHARE = 0.05


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with mock_process(MockConfig(slots=4, ttft_s=0.04, token_s=0.005)) as served:
        yield served.base_url


def test_a_starved_client_is_client_bound_with_no_knee_and_says_why(engine: str, tmp_path: Path) -> None:
    args = [
        "--slo",
        "ttft:0.5",
        "--start-qps",
        "8",
        "--duration",
        "3",
        "--timeout",
        "5",
        "--min-requests",
        "0",
        "--warmup",
        "1",
    ]
    argv = [*CAPACITY, "--url", engine, "--out", str(tmp_path), "--prompt-tokens", "16", *args]
    client = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert client.stderr is not None
        seen = [client.stderr.readline()]
        while "client ceiling" not in seen[-1] and seen[-1] and len(seen) < 50:
            seen.append(client.stderr.readline())
        assert "client ceiling" in seen[-1], seen
        # Its ceiling measured at full speed; from here on, its CPU limit.
        with cpu_limited(client.pid, CPU_SHARE):
            output, errors = client.communicate(timeout=600)
    finally:
        client.kill()
        client.wait()
    data = json.loads((tmp_path / "capacity.json").read_text())
    print(f"\n{data['message']}")
    assert client.returncode == 3, output + errors
    assert data["status"] == "client_bound" and data["knee"]["estimate"] is None
    assert data["message"].startswith("client_bound above ") and "remedy:" in data["message"]
    stopped = [s for s in data["steps"] if s["status"] == "client_bound"]
    assert stopped, "the step the client could not drive is in the report"
    evidence = stopped[-1]["reason"]
    assert "scheduling lag" in evidence or "ceiling" in evidence or "below 98%" in evidence, evidence
    assert stopped[-1]["lag_p99_s"] > 0.05 or "ceiling" in evidence
    assert (tmp_path / "capacity.md").read_text().startswith("client_bound above ")
