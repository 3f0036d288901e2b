"""Two load clients against one real CPU vLLM at three rates: `vllm bench serve` and servescope's.

At each rate both send the same kind of requests (random prompts of 32 tokens, 16 output tokens,
ignore_eos, streamed, Poisson arrivals) to the same server, one after the other; the engine's own TTFT
histogram is read around each run (its P99 bucket), and each client's CPU per request is measured
(`vllm bench serve` as a child process's rusage; servescope's own accounting, its /metrics sampling
excluded). Writes bench/results/vllm-clients.{json,md}; docs/load-testing.md quotes the table.

Usage: python bench/vllm_clients.py --url http://127.0.0.1:18000 [--rates 8 24 40] [--seconds 20]
Needs ../shared/tools/real-vllm/setup.sh's venv (its `vllm` and tiny model) and the server running.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from servescope.kit.load.client import RequestSpec
from servescope.kit.load.engine_metrics import bucket_delta, metrics_url, parse_page
from servescope.kit.load.pressure import cpu_pressure
from servescope.kit.load.runner import HttpStepRunner
from servescope.kit.load.summary import summarise
from servescope.kit.load.validity import ValidityRules, bucket_bounds
from servescope.kit.load.workload import Workload

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script: the root, for `bench`
from bench.common import machine, write

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "servescope"
VLLM, MODEL = CACHE / "vllm-venv" / "bin" / "vllm", CACHE / "tiny-llm"
INPUT, OUTPUT = 32, 16


def engine_buckets(url: str) -> dict[float, float]:
    return parse_page(httpx.get(metrics_url(url), timeout=10, trust_env=False).text).ttft_buckets


def bench_argv(url: str, rate: float, prompts: int, seed: int, folder: Path) -> list[str]:
    argv = [str(VLLM), "bench", "serve", "--backend", "vllm", "--base-url", url, "--model", "tiny-llm"]
    argv += ["--tokenizer", str(MODEL), "--dataset-name", "random", "--random-input-len", str(INPUT)]
    argv += ["--random-output-len", str(OUTPUT), "--ignore-eos", "--request-rate", str(rate)]
    argv += ["--num-prompts", str(prompts), "--percentile-metrics", "ttft,itl,e2el"]
    argv += ["--metric-percentiles", "50,90,99", "--seed", str(seed), "--save-result"]
    return [*argv, "--result-dir", str(folder), "--result-filename", "result.json"]


def child_cpu(argv: list[str], timeout: float) -> float:
    """CPU seconds a child process took, start-up included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def vllm_bench(url: str, rate: float, seconds: float, seed: int, startup_s: float) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="vllm-bench-"))
    argv = bench_argv(url, rate, round(rate * seconds), seed, folder)
    before = engine_buckets(url)
    cpu_s = child_cpu(argv, seconds * 10 + 120) - startup_s
    after = engine_buckets(url)
    data = json.loads((folder / "result.json").read_text())
    bucket = bucket_bounds(bucket_delta(before, after), 0.99)
    return {
        "client": "vllm bench serve",
        "rate": rate,
        "completed": data["completed"],
        "p50_ttft_s": data["p50_ttft_ms"] / 1000,
        "p99_ttft_s": data["p99_ttft_ms"] / 1000,
        "p99_itl_s": data["p99_itl_ms"] / 1000,
        "engine_p99_bucket_s": list(bucket) if bucket else None,
        # Its start-up (importing vLLM, loading the tokenizer: a one-request run's CPU) left out.
        "cpu_ms_per_request": 1000 * max(0.0, cpu_s) / max(1, data["completed"]),
        "cpu_pressure": cpu_pressure(),
    }


def servescope_load(url: str, rate: float, seconds: float, seed: int) -> dict[str, Any]:
    runner = HttpStepRunner(
        RequestSpec(url, "tiny-llm", timeout_s=30.0),
        Workload("random", INPUT, OUTPUT),
        engine_metrics_url=metrics_url(url),
        rules=ValidityRules(max_lag_p99_s=0.05),
        warmup_s=0.0,
    )
    result = runner.run_step(rate, seconds, seed=seed)
    summary = summarise(result)
    return {
        "client": "servescope load",
        "rate": rate,
        "completed": summary["succeeded"],
        "status": summary["status"],
        "p50_ttft_s": summary["service_ttft_s"]["p50"],
        "p99_ttft_s": summary["service_ttft_s"]["p99"],
        "p99_ttft_from_schedule_s": summary["ttft_s"]["p99"],
        "p99_itl_s": summary["itl_s"]["p99"],
        "engine_p99_bucket_s": summary["engine_ttft_p99_bucket_s"],
        "lag_p99_s": summary["schedule_lag_p99_s"],
        "cpu_ms_per_request": summary["client_cpu_per_request_ms"],
        "cpu_pressure": cpu_pressure(),
    }


def markdown(rows: list[dict[str, Any]], host: str) -> str:
    lines = [
        f"Real CPU vLLM (tiny model) on {host}; random prompts of {INPUT} tokens, {OUTPUT} output tokens.",
        "",
        "| req/s | client | P50 TTFT | P99 TTFT (from send) | engine P99 bucket | P99 - bucket top | "
        "P99 ITL | client CPU/request | CPU pressure |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        bucket = row["engine_p99_bucket_s"]
        above = "-" if not bucket else f"{(row['p99_ttft_s'] - bucket[1]) * 1000:+.0f} ms"
        shown = "-" if not bucket else f"({bucket[0] * 1000:g}, {bucket[1] * 1000:g}] ms"
        lines.append(
            f"| {row['rate']:g} | {row['client']} | {row['p50_ttft_s'] * 1000:.0f} ms | "
            f"{row['p99_ttft_s'] * 1000:.0f} ms | {shown} | {above} | {row['p99_itl_s'] * 1000:.0f} ms | "
            f"{row['cpu_ms_per_request']:.2f} ms | {row['cpu_pressure']:.0f} % |"
        )
    lines += ["", "CPU pressure: PSI avg10 at the end of each run (share of time a task waited for a CPU)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--rates", type=float, nargs="+", default=[8.0, 24.0, 40.0])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    rows = []
    startup_s = child_cpu(bench_argv(args.url, 1.0, 1, 0, Path(tempfile.mkdtemp())), 300)
    for index, rate in enumerate(args.rates):
        rows.append(vllm_bench(args.url, rate, args.seconds, index, startup_s))
        rows.append(servescope_load(args.url, rate, args.seconds, index))
        print(json.dumps(rows[-2:]), flush=True)
    host = machine()
    where = f"{host['cpu']} ({host['cores']} cores), CPU pressure shared with other work"
    write("vllm-clients", {"machine": host, "rows": rows}, markdown(rows, where))


if __name__ == "__main__":
    main()
