"""`servescope capacity run --url` against a queue whose knee is computed, over real HTTP.

The engine is `servescope load mock-server`: 4 FIFO slots, 20 ms prefill, 2.5 ms per further token, 32
output tokens (the operators' 40 ms / 5 ms engine at twice the speed, so a search fits a few minutes).
It books each request's slot when it arrives, so a busy machine delays its tokens' sending, never its
queue; the queue simulation of tests/capacity/fifo_truth.py gives its knee. On a quiet machine the
search must report `measured`, its estimate within 10 % of the computed knee and its interval holding
it; each step's throughput within 5 % of the engine's own token counter. A client starved of CPU (its
process at the lowest priority, pinned to one CPU with two CPU-bound neighbours) must report
`client_bound`, no knee, and the evidence: the step it could not drive and why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servescope.load.calibrate import mock_process
from servescope.load.mock_server import MockConfig
from tests.capacity.fifo_truth import FifoEngine, true_knee
from tests.support.machine import skip_if_busy

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
FAST = FifoEngine(slots=4, prefill_s=0.02, token_s=0.0025, output_tokens=32)
CAPACITY = [sys.executable, "-m", "servescope", "capacity", "run"]


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with mock_process(MockConfig(slots=4, ttft_s=0.02, token_s=0.0025)) as served:
        yield served.base_url


def capacity_run(url: str, out: Path, *args: str, preexec: Any = None) -> tuple[int, dict[str, Any], str]:
    argv = [
        *CAPACITY,
        "--url",
        url,
        "--out",
        str(out),
        "--prompt-tokens",
        "16",
        "--output-tokens",
        "32",
        *args,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False, preexec_fn=preexec)
    data = json.loads((out / "capacity.json").read_text()) if (out / "capacity.json").exists() else {}
    return done.returncode, data, done.stdout + done.stderr


@pytest.mark.idle_cpu
def test_the_knee_over_http_is_the_computed_one(engine: str, tmp_path: Path) -> None:
    truth = true_knee(FAST, 0.15, 0.9)  # 33.9 req/s; capacity 41 req/s
    args = ["--slo", "ttft:0.15", "--quantile", "0.9", "--start-qps", "16", "--duration", "7.5"]
    args += ["--min-requests", "0", "--resolution", "0.1", "--warmup", "2", "--confidence", "0.99"]
    args += ["--max-parts", "3"]
    code, data, output = capacity_run(engine, tmp_path, *args)
    steps = data["steps"]
    print(f"\ncomputed knee {truth:.2f} req/s; {data['message']}")
    for step in steps:
        print(
            f"  {step['offered']:.2f} req/s: {step['verdict']} ({step['status']}) p90 "
            f"{step['percentiles']['p90_ttft']:.3f} s, {step['throughput_tokens']:.0f} tokens/s (engine "
            f"{step['engine_tokens']:.0f}), lag p99 {step['lag_p99_s'] * 1000:.0f} ms"
        )
    for step in steps:  # every step, whatever its verdict: the engine's own count agrees
        assert step["engine_tokens"] is not None, step
        assert abs(step["throughput_tokens"] / step["engine_tokens"] - 1) <= 0.05, step
    assert all(s["verdict"] == "miss" for s in steps if s["status"] == "overloaded"), (
        "overload is never a pass"
    )
    if data["status"] == "client_bound":
        # The honest answer on a starved machine: no knee, and the step that showed it.
        stopped = [s for s in steps if s["status"] == "client_bound"]
        assert code == 3 and data["knee"]["estimate"] is None and stopped, output
        skip_if_busy(data["message"])
    assert code == 0 and data["status"] == "measured", output
    estimate, lower, upper = data["knee"]["estimate"], data["knee"]["lower"], data["knee"]["upper"]
    assert abs(estimate / truth - 1) <= 0.10, (estimate, truth)
    assert lower <= truth <= (upper if upper is not None else float("inf")), (lower, truth, upper)


def _pinned(cpu: int, nice: int) -> Any:
    def pin() -> None:
        os.sched_setaffinity(0, {cpu})
        os.nice(nice)

    return pin


def test_a_starved_client_is_client_bound_with_no_knee_and_says_why(engine: str, tmp_path: Path) -> None:
    cpu = max(os.sched_getaffinity(0))
    # The operators' engine scale (P99 TTFT <= 500 ms, lag bound 50 ms). Once the client has started and
    # measured its ceiling, two CPU-bound neighbours join it on its CPU, where it runs at the lowest
    # priority: it gets about a hundredth of that CPU.
    args = [
        "--slo",
        "ttft:0.5",
        "--start-qps",
        "8",
        "--duration",
        "5",
        "--min-requests",
        "0",
        "--warmup",
        "1",
    ]
    argv = [*CAPACITY, "--url", engine, "--out", str(tmp_path), "--prompt-tokens", "16", *args]
    client = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_pinned(cpu, 19)
    )
    neighbours: list[subprocess.Popen[bytes]] = []
    try:
        assert client.stderr is not None
        seen = [client.stderr.readline()]
        while "client ceiling" not in seen[-1] and seen[-1] and len(seen) < 50:
            seen.append(client.stderr.readline())
        assert "client ceiling" in seen[-1], seen
        neighbours = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=_pinned(cpu, 0))
            for _ in range(2)
        ]
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
