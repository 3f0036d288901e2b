"""`servescope capacity run --url` against a REAL vLLM (CPU build, tiny model) agrees with a knee found by
sweeps of `vllm bench serve` within 20 %.

Both load the same server with the same kind of requests (random prompts of 32 tokens, 16 output
tokens, Poisson arrivals) and the same objective, P90 TTFT <= 500 ms. A sweep runs `vllm bench serve`
at rising rates (20 s each) and interpolates, in log latency, where its P90 TTFT crosses 500 ms. One
sweep's crossing is not a steady reference: near its knee the engine's P90 over 20 s jumps between 0.07
and 1 s from one run at a rate to the next, and single sweeps put the knee anywhere from 95 to 163 req/s.
So the reference is the median knee of three sweeps (different seeds); capacity runs its own search. A
CPU engine's speed follows the CPU it gets, so both must measure a quiet machine: `.ci/run` runs this
module after `make test`, with the shared server still up and SERVESCOPE_TEST_QUIET=1, and it skips,
saying so, everywhere else. Even then a CPU engine takes every core it can: the clients, which must send
on schedule, would wait for a CPU and report `client_bound` (seen at 32 req/s on 2 cores, its lag P99
1 s). So the server's processes and threads are pinned to all cores but the last, and both clients run on
the last one alone; the pinning is undone afterwards.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import NEEDS_SHARED_VLLM, VLLM_URL
from tests.support import descendants

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "servescope"
VLLM, MODEL = CACHE / "vllm-venv" / "bin" / "vllm", CACHE / "tiny-llm"
QUIET = os.environ.get("SERVESCOPE_TEST_QUIET") == "1"
BOUND_S, QUANTILE = 0.5, 0.9
RATES = (8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192)
SECONDS = 20
SWEEPS = 3
pytestmark = [
    *NEEDS_SHARED_VLLM,
    pytest.mark.slow,
    pytest.mark.skipif(not QUIET, reason="measures a CPU engine's knee: needs a quiet machine (.ci/run)"),
    pytest.mark.skipif(
        not VLLM.exists(), reason="no `vllm bench serve`: run ../shared/tools/real-vllm/setup.sh"
    ),
]


def _pin(pid: int, cpus: str) -> None:
    # vLLM's engine core runs in a child process; -a: every thread, the OpenMP workers included.
    for process in {pid, *descendants(pid)}:
        subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(process)], capture_output=True, check=False)


@pytest.fixture
def client_cpu() -> Iterator[list[str]]:
    """The prefix that runs a client on the last core, the shared server pinned to the others."""
    cpus = sorted(os.sched_getaffinity(0))
    pidfile = Path(os.environ.get("SERVESCOPE_TEST_VLLM_PIDFILE", "/nonexistent"))
    if len(cpus) < 2 or not pidfile.is_file():
        pytest.skip("needs two cores and the shared server's pid file (SERVESCOPE_TEST_VLLM_PIDFILE)")
    server = int(pidfile.read_text().strip())
    _pin(server, ",".join(str(cpu) for cpu in cpus[:-1]))
    try:
        yield ["taskset", "-c", str(cpus[-1])]
    finally:
        _pin(server, ",".join(str(cpu) for cpu in cpus))


def bench_p90(rate: int, folder: Path, prefix: list[str], seed: int = 1) -> float:
    """`vllm bench serve` at `rate` for SECONDS, run with `prefix`: its P90 TTFT, seconds."""
    argv = [
        *prefix,
        str(VLLM),
        "bench",
        "serve",
        "--backend",
        "vllm",
        "--base-url",
        VLLM_URL,
        "--model",
        "tiny-llm",
    ]
    argv += ["--tokenizer", str(MODEL), "--dataset-name", "random", "--random-input-len", "32"]
    argv += ["--random-output-len", "16", "--ignore-eos", "--request-rate", str(rate), "--seed", str(seed)]
    argv += [
        "--num-prompts",
        str(rate * SECONDS),
        "--percentile-metrics",
        "ttft",
        "--metric-percentiles",
        "90",
    ]
    argv += ["--save-result", "--result-dir", str(folder), "--result-filename", f"{rate}-{seed}.json"]
    subprocess.run(argv, capture_output=True, text=True, timeout=SECONDS * 10 + 180, check=True)
    return float(json.loads((folder / f"{rate}-{seed}.json").read_text())["p90_ttft_ms"]) / 1000


def sweep_knee(prefix: list[str], seed: int = 1, lowest: float = 0) -> tuple[float, list[tuple[int, float]]]:
    """Where the sweep's P90 TTFT crosses the bound, log-linear between the rates around it; the sweep
    starts at the highest rate not above `lowest` (the first, when none)."""
    folder, points = Path(tempfile.mkdtemp(prefix="vllm-sweep-")), []
    start = max([rate for rate in RATES if rate <= lowest] or [RATES[0]])
    for rate in RATES[RATES.index(start) :]:
        points.append((rate, bench_p90(rate, folder, prefix, seed)))
        if points[-1][1] > BOUND_S:
            break
    (low, low_p90), (high, high_p90) = points[-2], points[-1]
    assert low_p90 <= BOUND_S < high_p90, f"no crossing in the sweep: {points}"
    share = math.log(BOUND_S / low_p90) / math.log(high_p90 / low_p90)
    return low + (high - low) * share, points


def reference_knee(prefix: list[str]) -> tuple[float, list[float], list[list[tuple[int, float]]]]:
    """The median knee of SWEEPS sweeps (seeds 1, 2, ...): one sweep's crossing moves by tens of percent
    from run to run near a CPU engine's knee. The later sweeps start at half the first one's knee."""
    first, points = sweep_knee(prefix)
    knees, every = [first], [points]
    for seed in range(2, SWEEPS + 1):
        knee, points = sweep_knee(prefix, seed, lowest=first / 2)
        knees.append(knee)
        every.append(points)
    return statistics.median(knees), knees, every


@pytest.mark.xfail(
    reason="known, open: with the server on one core and each client on the other, the median of three "
    "sweeps put the knee at 140.3 req/s (118.0, 140.3, 148.8; `vllm bench serve` kept its schedule, "
    "completed/duration within 3 % of the rate) and `capacity run` at 104.5 (-25.5 %); over three runs "
    "capacity read 100, 104.6 and 104.5, below every sweep but one. At 112 req/s the sweeps' P90 TTFT "
    "was 0.29-0.38 s where capacity finds the 0.5 s bound crossed near 114: the clients' TTFT differ.",
    strict=False,
)
def test_capacity_agrees_with_a_vllm_bench_serve_sweep_within_20_percent(
    tmp_path: Path, client_cpu: list[str]
) -> None:
    reference, knees, points = reference_knee(client_cpu)
    argv = [
        *client_cpu,
        sys.executable,
        "-m",
        "servescope",
        "capacity",
        "run",
        "--url",
        VLLM_URL,
        "--out",
        str(tmp_path),
    ]
    argv += ["--slo", f"ttft:{BOUND_S}", "--quantile", str(QUANTILE), "--start-qps", "8", "--duration", "10"]
    argv += ["--min-requests", "0", "--max-parts", "3", "--resolution", "0.1", "--warmup", "3"]
    argv += ["--prompt-tokens", "32", "--output-tokens", "16", "--timeout", "20"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    data = json.loads((tmp_path / "capacity.json").read_text())
    print(f"\nvllm bench serve sweeps (rate, P90 TTFT s): {points}")
    print(f"their knees {[round(k, 1) for k in knees]} req/s, median {reference:.2f}")
    print(f"servescope: {data['message']}")
    assert done.returncode == 0 and data["status"] == "measured", done.stdout + done.stderr
    estimate = data["knee"]["estimate"]
    assert abs(estimate / reference - 1) <= 0.20, (estimate, reference)
