"""The operators' batch trade-off on the real CPU vLLM: knee and tail latency for max_num_seqs 1 ... 8.

A grid study through the `tune` command launcher: each trial restarts `vllm serve` (the tiny model of
../shared/tools/real-vllm/setup.sh) with its max_num_seqs and searches its knee (P90 TTFT <= 500 ms,
random prompts of 32 tokens, 16 output tokens). Reported beside the operators' guide (batch 1 -> 8:
3.2x QPS, +120 % P99): each trial's knee, and the P99 time per output token and P99 TTFT of its
highest passing step. Writes bench/results/batch-tradeoff-vllm.{json,md}.

Usage: python bench/batch_tradeoff_vllm.py [--seqs 1 2 4 8] [--port 18241]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from servescope.kit.capacity.runners import HttpOptions, http_runner
from servescope.kit.load.validity import ValidityRules
from servescope.kit.load.workload import Workload
from servescope.kit.tune.launchers import CommandLauncher
from servescope.kit.tune.space import parse_space
from servescope.kit.tune.strategies import run_study

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script: the root, for `bench`
from bench.common import machine, write
from bench.report_sections import table

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "servescope"
VLLM, MODEL = CACHE / "vllm-venv" / "bin" / "vllm", CACHE / "tiny-llm"
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu"}
ENV |= {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


def study(seqs: list[int], port: int) -> list[dict[str, Any]]:
    # One piece: the space, the launcher and its engine live and stop together.
    base = f"http://127.0.0.1:{port}"
    template = (
        f"{VLLM} serve {MODEL} --host 127.0.0.1 --port {port} --served-model-name tiny-llm --dtype float32 "
        "--max-model-len 256 --enforce-eager {flags}"
    )
    space = parse_space(
        {
            "parameters": {"max_num_seqs": seqs},
            "capacity": {
                "slo": ["ttft:0.5"],
                "quantile": 0.9,
                "duration_s": 8,
                "start_qps": 2,
                "max_qps": 128,
                "resolution": 0.15,
                "min_requests": 0,
                "max_parts": 3,
                "warmup_s": 2,
            },
        }
    )
    # A lag bound of 250 ms, not the default 50 ms: on a shared 2-core machine the client waits for a CPU
    # beside the engine, and a client-bound step would end the trial (the steps say their lag).
    rules = ValidityRules(max_lag_p99_s=0.25)
    options = HttpOptions(workload=Workload("random", 32, 16), warmup_s=2.0, rules=rules)
    log = Path(tempfile.mkdtemp(prefix="batch-tradeoff-")) / "vllm.log"
    launcher = CommandLauncher(
        template, f"{base}/health", lambda _: http_runner(base, options), 300, log_path=log, env=ENV
    )
    try:
        found = run_study(
            space, launcher, "grid", prune=False, on_trial=lambda t: print(t.label, t.knee, t.reason)
        )
    finally:
        launcher.stop()
    rows = []
    for trial in found.trials:
        steps = [s for s in (trial.run.steps if trial.run else []) if s.meets]
        top = max(steps, key=lambda s: s.offered, default=None)
        rows.append(
            {
                "max_num_seqs": trial.params["max_num_seqs"],
                "state": trial.state,
                "knee": trial.knee[0],
                "interval": [trial.knee[1], trial.knee[2]],
                "reason": trial.reason,
                "at": None if top is None else top.offered,
                "p99_tpot_s": None if top is None else top.percentiles.get("p99_tpot"),
                "p99_ttft_s": None if top is None else top.percentiles.get("p99_ttft"),
            }
        )
    return rows


def _cells(row: dict[str, Any], first: float) -> list[str]:
    if row["state"] != "complete":
        return [str(row["max_num_seqs"]), f"{row['state']}: {row['reason']}", "", "", "", ""]
    low, high = row["interval"]
    return [
        str(row["max_num_seqs"]),
        f"{row['knee']:.2f} [{low:.2f}, {high:.2f}]",
        f"{row['knee'] / first:.2f}x",
        f"{row['at']} req/s",
        "-" if row["p99_tpot_s"] is None else f"{row['p99_tpot_s'] * 1000:.1f} ms",
        "-" if row["p99_ttft_s"] is None else f"{row['p99_ttft_s'] * 1000:.0f} ms",
    ]


def markdown(rows: list[dict[str, Any]], where: str) -> str:
    first = rows[0]["knee"] or float("nan")
    header = ["max_num_seqs", "knee req/s [interval]", "x batch 1", "highest passing step"]
    lines = [
        f"Real CPU vLLM (tiny model, --enforce-eager) on {where}; P90 TTFT <= 500 ms; random prompts of 32 "
        "tokens, 16 output tokens; each configuration restarted through the tune command launcher; "
        "schedule lag bound 250 ms.",
        "",
        *table([*header, "P99 TPOT there", "P99 TTFT there"], [_cells(row, first) for row in rows]),
        "",
        "The operators' guide, on A100-class GPUs: batch 1 -> 8, 3.2x QPS and +120 % P99.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqs", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--port", type=int, default=18241)
    args = parser.parse_args()
    rows = study(args.seqs, args.port)
    host = machine()
    where = f"{host['cpu']} ({host['cores']} cores, shared with other work)"
    write("batch-tradeoff-vllm", {"machine": host, "rows": rows}, markdown(rows, where))


if __name__ == "__main__":
    main()
