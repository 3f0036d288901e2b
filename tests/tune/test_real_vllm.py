"""A 2-trial tune against the real CPU vLLM: each trial restarts `vllm serve` through the command launcher.

The load comes from a small open-loop HTTP step runner kept in this test (streamed /v1/completions on
a constant schedule, TTFT from the scheduled time, the engine's TTFT histogram read as /metrics
deltas), so the launcher, the knee search, the cross-check and the report run against a real engine.
Starts and stops its own server on port 18221 (a few minutes on 2 cores), with the venv and tiny model
that ../shared/tools/real-vllm/setup.sh installs.
"""

from __future__ import annotations

import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from servescope.load.records import RequestRecord, StepResult
from servescope.tune.cli import write_reports
from servescope.tune.launchers import CommandLauncher
from servescope.tune.space import parse_space
from servescope.tune.strategies import run_study
from tests.helpers import SHARED

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "servescope"
VLLM, MODEL = CACHE / "vllm-venv" / "bin" / "vllm", CACHE / "tiny-llm"
PORT = 18221
BASE = f"http://127.0.0.1:{PORT}"
pytestmark = [
    pytest.mark.real_vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        not (SHARED / "tools" / "real-vllm" / "setup.sh").exists() or not VLLM.exists() or not MODEL.exists(),
        reason="no CPU vLLM: run ../shared/tools/real-vllm/setup.sh once to install its venv and model",
    ),
]
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu"}
ENV |= {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
TEMPLATE = (
    f"{VLLM} serve {MODEL} --host 127.0.0.1 --port {PORT} --served-model-name tiny-llm --dtype float32 "
    "--max-model-len 256 --enforce-eager {flags}"
)


def _ttft_buckets() -> dict[float, float]:
    text = httpx.get(f"{BASE}/metrics", timeout=10).text
    found: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "vllm:time_to_first_token_seconds":
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    bound = float(sample.labels["le"])
                    found[bound] = found.get(bound, 0.0) + sample.value
    return found


class OpenLoopRunner:
    """Constant-rate streamed completions; enough of a load runner to drive a real engine in this test."""

    def run_step(self, offered: float, duration_s: float, *, seed: int) -> StepResult:
        count = max(1, round(offered * duration_s))
        before = _ttft_buckets()
        start = time.monotonic()
        lock = threading.Lock()
        records: list[RequestRecord] = []

        def one(index: int) -> None:
            due = index / offered
            time.sleep(max(0.0, start + due - time.monotonic()))
            sent = time.monotonic() - start
            first = done = None
            error, tokens = None, 0
            body = {"model": "tiny-llm", "prompt": f"seed {seed} request {index}", "max_tokens": 16}
            body |= {"stream": True, "ignore_eos": True}
            try:
                with httpx.stream("POST", f"{BASE}/v1/completions", json=body, timeout=60) as response:
                    for line in response.iter_lines():
                        if line.startswith("data: ") and line != "data: [DONE]":
                            first = first if first is not None else time.monotonic() - start
                            tokens += 1
                done = time.monotonic() - start
            except httpx.HTTPError as err:
                error = type(err).__name__
            with lock:
                records.append(RequestRecord(due, sent, first, done, 8, tokens, error))

        with ThreadPoolExecutor(max_workers=64) as pool:
            list(pool.map(one, range(count)))
        after = _ttft_buckets()
        buckets = tuple((bound, after[bound] - before.get(bound, 0.0)) for bound in sorted(after))
        lag = sorted(r.sent_s - r.scheduled_s for r in records if r.sent_s is not None)
        return StepResult(
            "open",
            offered,
            duration_s,
            tuple(sorted(records, key=lambda r: r.scheduled_s)),
            schedule_lag_p99_s=lag[math.ceil(0.99 * len(lag)) - 1] if lag else 0.0,
            engine_ttft_buckets=buckets,
        )


def test_two_trials_restart_a_real_vllm_and_report(tmp_path: Path) -> None:
    space = parse_space(
        {
            "parameters": {"max_num_seqs": [1, 8]},
            "capacity": {
                "slo": ["ttft:1.0"],
                "duration_s": 6,
                "start_qps": 1,
                "max_qps": 8,
                "resolution": 0.3,
            },
        }
    )
    launcher = CommandLauncher(
        TEMPLATE,
        f"{BASE}/health",
        OpenLoopRunner,
        start_timeout_s=240,
        log_path=tmp_path / "vllm.log",
        env=ENV,
    )
    try:
        study = run_study(space, launcher, "grid", prune=False)
    finally:
        launcher.stop()
    print({t.label: (t.state, t.knee, t.reason) for t in study.trials})
    assert [t.state for t in study.trials] == ["complete", "complete"], [t.reason for t in study.trials]
    starts = [line for line in (tmp_path / "vllm.log").read_text().splitlines() if "non-default args" in line]
    assert len(starts) == 2 and "'max_num_seqs': 8" in starts[1]  # one restart per trial, with its flags
    # Both configurations reach a knee; which is higher is noise for a tiny model on a shared CPU.
    assert all(t.knee[0] > 0 and t.run is not None and t.run.steps for t in study.trials)
    checks = [c for t in study.trials if t.run is not None for c in t.run.cross_checks]
    # Every step was cross-checked against the engine's own histogram. The client cannot see a first
    # token before the engine made it; how far above the engine's bucket it lies is this runner's (and
    # this machine's) overhead, which the report flags step by step rather than this test hiding it.
    assert len(checks) == sum(len(t.run.knee.steps) for t in study.trials if t.run is not None)
    assert all(c.client_p99 >= c.engine_low and math.isfinite(c.engine_high) for c in checks), checks
    write_reports(study, tmp_path / "report")
    assert "max_num_seqs=8" in (tmp_path / "report" / "tune.md").read_text()
    print(
        {t.label: t.knee for t in study.trials},
        [(c.offered, c.client_p99, c.engine_low, c.engine_high) for c in checks],
    )
