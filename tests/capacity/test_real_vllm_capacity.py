"""`servescope capacity run --url` against a REAL vLLM (CPU build, tiny model) agrees with a knee found by
a sweep of `vllm bench serve` within 20 %.

Both load the same server with the same kind of requests (random prompts of 32 tokens, 16 output tokens,
Poisson arrivals) and the same objective, P90 TTFT <= 500 ms. The sweep runs `vllm bench serve` at rising
rates, 60 s each, and interpolates, in log latency, where its P90 TTFT crosses 500 ms; capacity runs its
own search. The steps are long because `vllm bench serve` has no warm-up: each step starts at an idle
engine, and near the knee the queue takes most of a minute to build. Over 20 s its P90 at 112 req/s read
0.264 s, over 60 s 0.465 s, and 20-s sweeps put the knee anywhere from 95 to 163 req/s (capacity warms
each step up and measures it in parts). A CPU engine's speed follows the CPU it gets, so both must
measure a quiet machine: `.ci/run` runs this module after `make test`, with the shared server still up
and SERVESCOPE_TEST_QUIET=1, and it skips, saying so, everywhere else. Even then a CPU engine takes every
core it can: the clients, which must send on schedule, would wait for a CPU and report `client_bound`
(seen at 32 req/s on 2 cores, its lag P99 1 s). So the server's processes and threads are pinned to all
cores but the last, and both clients run on the last one alone; the pinning is undone afterwards.

Two cores hold three things that each want one (the clients, vLLM's API server, its engine core with
the worker), and either way of sharing them moves the knee: docs/capacity-and-tuning.md gives the runs.
"""

from __future__ import annotations

import json
import math
import os
import secrets
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
# Far below the knee a step says nothing the interpolation needs: the sweep starts at 48 req/s (P90 TTFT
# 0.06 s there).
RATES = (48, 64, 80, 96, 112, 128, 144, 160, 192)
SECONDS = 60
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


def bench_p90(rate: int, folder: Path, prefix: list[str], seed: int) -> float:
    """`vllm bench serve` at `rate` for SECONDS, run with `prefix`: its P90 TTFT, seconds. Each rate's
    prompts are drawn from a seed of its own, which no earlier run used: prompts the server has seen
    could be answered from its prefix cache, their prefill nearly free (this CPU build reports no hits,
    a GPU build does)."""
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
    argv += [
        "--random-output-len",
        "16",
        "--ignore-eos",
        "--request-rate",
        str(rate),
        "--seed",
        str(seed + rate),
    ]
    argv += [
        "--num-prompts",
        str(rate * SECONDS),
        "--percentile-metrics",
        "ttft",
        "--metric-percentiles",
        "90",
    ]
    argv += ["--save-result", "--result-dir", str(folder), "--result-filename", f"{rate}.json"]
    subprocess.run(argv, capture_output=True, text=True, timeout=SECONDS * 10 + 180, check=True)
    return float(json.loads((folder / f"{rate}.json").read_text())["p90_ttft_ms"]) / 1000


def sweep_knee(prefix: list[str], seed: int) -> tuple[float, list[tuple[int, float]]]:
    """Where the sweep's P90 TTFT crosses the bound, log-linear between the rates around it."""
    folder, points = Path(tempfile.mkdtemp(prefix="vllm-sweep-")), []
    for rate in RATES:
        points.append((rate, bench_p90(rate, folder, prefix, seed)))
        if points[-1][1] > BOUND_S:
            break
    (low, low_p90), (high, high_p90) = points[-2], points[-1]
    assert low_p90 <= BOUND_S < high_p90, f"no crossing in the sweep: {points}"
    share = math.log(BOUND_S / low_p90) / math.log(high_p90 / low_p90)
    return low + (high - low) * share, points


@pytest.mark.xfail(
    reason="open, kept until runs agree with a margin: every run since prompts are drawn per step agreed "
    "within 20 %, one by 2 points (-18.0 %); the engine and the search move between runs "
    "(docs/capacity-and-tuning.md lists the runs).",
    strict=False,
)
def test_capacity_agrees_with_a_vllm_bench_serve_sweep_within_20_percent(
    tmp_path: Path, client_cpu: list[str]
) -> None:
    # Prompts no earlier run sent (a server's prefix cache outlives a test run): a seed of this run's.
    seed = secrets.randbelow(1 << 30)
    reference, points = sweep_knee(client_cpu, seed)
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
    argv += ["--prompt-tokens", "32", "--output-tokens", "16", "--timeout", "20", "--seed", str(seed + 1)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    data = json.loads((tmp_path / "capacity.json").read_text())
    print(f"\nvllm bench serve sweep (rate, P90 TTFT s): {points} -> knee {reference:.2f} req/s")
    print(f"servescope: {data['message']}")
    for step in data["steps"]:  # what each step read, for the record beside the sweep's points
        print(
            f"  {step['offered']:g} req/s: {step['verdict']} ({step['status']}, {step['parts']} parts) P90 "
            f"TTFT {step['percentiles'][f'p{QUANTILE * 100:g}_ttft']:.3f} s, lag P99 "
            f"{step['lag_p99_s'] * 1000:.0f} ms, CPU pressure {step['cpu_pressure'] or 0:.0f} %"
            + (f": {step['reason']}" if step["reason"] else "")
        )
    assert done.returncode == 0 and data["status"] == "measured", done.stdout + done.stderr
    estimate = data["knee"]["estimate"]
    assert abs(estimate / reference - 1) <= 0.20, (estimate, reference)
