"""A 2-trial tune against the real CPU vLLM: each trial restarts `vllm serve` through the command launcher.

The load is `servescope load`'s open-loop HTTP runner (what `tune --url` drives), so the launcher, the
knee search, the cross-check and the report run against a real engine. Starts and stops its own server
on port 18221 (a few minutes on 2 cores), with the venv and tiny model that
../shared/tools/real-vllm/setup.sh installs; it runs only when asked (SERVESCOPE_TEST_VLLM_OWN_SERVERS).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from servescope.kit.capacity.runners import HttpOptions, http_runner
from servescope.kit.load.records import StepRunner
from servescope.kit.load.workload import Workload
from servescope.kit.tune.cli import write_reports
from servescope.kit.tune.launchers import CommandLauncher
from servescope.kit.tune.space import parse_space
from servescope.kit.tune.strategies import run_study
from tests.helpers import OWN_VLLM_SERVERS, OWN_VLLM_SKIP_REASON, SHARED
from tests.tune.searches import short_capacity

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "servescope"
VLLM, MODEL = CACHE / "vllm-venv" / "bin" / "vllm", CACHE / "tiny-llm"
PORT = 18221
BASE = f"http://127.0.0.1:{PORT}"
pytestmark = [
    pytest.mark.real_vllm,
    pytest.mark.slow,
    pytest.mark.skipif(not OWN_VLLM_SERVERS, reason=OWN_VLLM_SKIP_REASON),
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


# Short requests, for short trials: the prompts are fitted to the tiny model's tokenizer (about 4.7
# tokens a word), which before the fit made 128 "tokens" outgrow --max-model-len 256.
SHORT = HttpOptions(workload=Workload(prompt_tokens=32, output_tokens=16))


def open_loop_runner(_: object) -> StepRunner:
    return http_runner(BASE, SHORT)


# Two configurations, each a short capacity search: the least a study that restarts the engine can be.
TWO_TRIALS = {
    "parameters": {"max_num_seqs": [1, 8]},
    "capacity": short_capacity(6, "ttft:1.0", start_qps=1, max_qps=8, resolution=0.3),
}


def test_two_trials_restart_a_real_vllm_and_report(tmp_path: Path) -> None:
    space = parse_space(TWO_TRIALS)
    launcher = CommandLauncher(
        TEMPLATE,
        f"{BASE}/health",
        open_loop_runner,
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
    # The launcher keeps one configuration's log at a time: the last start's, with the last trial's flags.
    assert len(starts) == 1 and "'max_num_seqs': 8" in starts[0]
    # Both configurations measured something; which is higher is noise for a tiny model on a shared CPU.
    assert all(t.run is not None and t.run.steps for t in study.trials)
    checks = [c for t in study.trials if t.run is not None for c in t.run.cross_checks]
    # Every step was cross-checked against the engine's own histogram. The client cannot see a first
    # token before the engine made it; how far above the engine's bucket it lies is the client's (and
    # this machine's) overhead, which the report flags step by step rather than this test hiding it.
    assert len(checks) == sum(len(t.run.knee.steps) for t in study.trials if t.run is not None)
    assert all(c.client_p99 >= c.engine_low and math.isfinite(c.engine_high) for c in checks), checks
    write_reports(study, tmp_path / "report")
    assert "max_num_seqs=8" in (tmp_path / "report" / "tune.md").read_text()
    print(
        {t.label: t.knee for t in study.trials},
        [(c.offered, c.client_p99, c.engine_low, c.engine_high) for c in checks],
    )
