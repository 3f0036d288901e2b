"""A short open-loop run against a REAL vLLM (CPU build, tiny model): it completes, counts tokens from
usage, samples the engine, and the client's P99 TTFT falls in the engine histogram's P99 bucket.

CI starts the server and sets SERVESCOPE_TEST_VLLM_URL; without it the test is skipped, saying so.
"""

from __future__ import annotations

import os

import pytest

from servescope.load.client import RequestSpec
from servescope.load.engine_metrics import metrics_url
from servescope.load.records import StepResult
from servescope.load.runner import HttpStepRunner
from servescope.load.schedule import LengthDistribution
from servescope.load.summary import render_text, summarise, ttft_agreement
from servescope.load.validity import ValidityRules

BASE = os.environ.get("SERVESCOPE_TEST_VLLM_URL", "").rstrip("/")
MODEL = os.environ.get("SERVESCOPE_TEST_VLLM_MODEL", "tiny-llm")
pytestmark = [
    pytest.mark.real_vllm,
    pytest.mark.skipif(
        not BASE,
        reason="no real vLLM: set SERVESCOPE_TEST_VLLM_URL (CI starts one with "
        "../shared/tools/real-vllm/setup.sh)",
    ),
]
# A shared 2-core machine starves the client now and then; a step whose own lag shows it is retried.
ATTEMPTS = 3
MAX_LAG_S = 0.1


def one_step(seed: int) -> StepResult:
    runner = HttpStepRunner(
        RequestSpec(BASE, MODEL, timeout_s=20.0),
        LengthDistribution(32, 16),
        engine_metrics_url=metrics_url(BASE),
        rules=ValidityRules(max_lag_p99_s=MAX_LAG_S),
    )
    return runner.run_step(2.0, 8.0, seed=seed)


def test_a_short_run_completes_and_agrees_with_the_engine_histogram() -> None:
    results = []
    for seed in range(ATTEMPTS):
        result = one_step(seed)
        results.append(result)
        print("\n" + render_text(summarise(result)))
        if result.valid:
            break
    result = results[-1]
    assert all(r.ok for r in result.records), {r.error for r in result.records}
    assert {r.output_tokens for r in result.records} == {16}, "ignore_eos and usage: exactly 16 tokens"
    assert result.valid, f"no valid step in {ATTEMPTS}: {[r.invalid_reason for r in results]}"
    assert result.engine_samples, "the engine's /metrics were sampled"
    agreement = ttft_agreement(result)
    assert agreement is not None, "the engine's TTFT histogram moved over the step"
    assert agreement.agrees, (
        f"client P99 TTFT {agreement.client_p99_s * 1000:.1f} ms is outside the engine's P99 bucket "
        f"{agreement.bucket} (+ {agreement.slack_s * 1000:.1f} ms of measured client lag)"
    )
