"""A client starved of CPU reports `client_bound`, no knee, and the evidence: the step it could not drive.

The client (`servescope capacity run --url`, the operators' engine scale: P99 TTFT <= 500 ms, so a lag
bound of 50 ms) starts alone and measures its ceiling; then a CPU-bound neighbour joins it on its CPU,
where it runs at the lowest priority (taskset, nice 19): against the neighbour's weight at nice 0 (1024
to 15) it gets about 1.5 % of that CPU. One neighbour starves it as surely as two, at half the CPU the
rest of the suite loses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from servescope_sim.mock_process import mock_process
from servescope_sim.mock_server import MockConfig

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
CAPACITY = [sys.executable, "-m", "servescope", "capacity", "run"]


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with mock_process(MockConfig(slots=4, ttft_s=0.04, token_s=0.005)) as served:
        # Off the CPU the client and its neighbours share: the engine the starved client measures is
        # not starved with it (on a one-CPU machine they share it, and the test says nothing more).
        others = os.sched_getaffinity(0) - {_client_cpu()}
        if others and served.child.pid is not None:
            os.sched_setaffinity(served.child.pid, others)
        yield served.base_url


def _client_cpu() -> int:
    return max(os.sched_getaffinity(0))


def _pinned(cpu: int, nice: int, argv: list[str]) -> list[str]:
    """`argv` run on CPU `cpu` only, at niceness `nice` (taskset and nice: no code between fork and exec)."""
    return ["nice", "-n", str(nice), "taskset", "-c", str(cpu), *argv]


def test_a_starved_client_is_client_bound_with_no_knee_and_says_why(engine: str, tmp_path: Path) -> None:
    # One piece: the neighbour is started mid-run and killed by one finally.
    cpu = _client_cpu()
    # The operators' engine scale (P99 TTFT <= 500 ms, lag bound 50 ms). Once the client has started and
    # measured its ceiling, a CPU-bound neighbour joins it on its CPU, where it runs at the lowest
    # priority: it gets about 1.5 % of that CPU.
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
    client = subprocess.Popen(
        _pinned(cpu, 19, argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    neighbours: list[subprocess.Popen[bytes]] = []
    try:
        assert client.stderr is not None
        seen = [client.stderr.readline()]
        while "client ceiling" not in seen[-1] and seen[-1] and len(seen) < 50:
            seen.append(client.stderr.readline())
        assert "client ceiling" in seen[-1], seen
        neighbours = [subprocess.Popen(_pinned(cpu, 0, [sys.executable, "-c", "while True: pass"]))]
        output, errors = client.communicate(timeout=600)
    finally:
        client.kill()
        for neighbour in neighbours:
            neighbour.kill()
            neighbour.wait()
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
