"""A short open-loop run against a REAL vLLM (CPU build, tiny model): it completes, counts tokens from
usage, samples the engine, and the client's P99 TTFT falls in the engine histogram's P99 bucket.

CI starts the server and sets SERVESCOPE_TEST_VLLM_URL; without it the test is skipped, saying so.
"""

from __future__ import annotations

import pytest

from servescope.load.client import RequestSpec
from servescope.load.engine_metrics import metrics_url
from servescope.load.records import StepResult
from servescope.load.runner import HttpStepRunner
from servescope.load.schedule import LengthDistribution
from servescope.load.summary import render_text, summarise, ttft_agreement
from servescope.load.validity import ValidityRules
from tests.helpers import NEEDS_SHARED_VLLM, VLLM_MODEL, VLLM_URL
from tests.support.attempts import until_holds
from tests.support.machine import BUSY_CPU_PRESSURE, cpu_pressure

pytestmark = NEEDS_SHARED_VLLM
# A shared 2-core machine starves the client or the server's front end now and then (neither is the
# engine, whose histogram starts at the request's arrival); such a step is measured again, at most
# ATTEMPTS times (tests/support/attempts), and every attempt is printed.
MAX_LAG_S = 0.1


def one_step(seed: int) -> StepResult:
    runner = HttpStepRunner(
        RequestSpec(VLLM_URL, VLLM_MODEL, timeout_s=20.0),
        LengthDistribution(32, 16),
        engine_metrics_url=metrics_url(VLLM_URL),
        rules=ValidityRules(max_lag_p99_s=MAX_LAG_S),
    )
    return runner.run_step(2.0, 8.0, seed=seed)


def agrees(result: StepResult) -> bool:
    agreement = ttft_agreement(result)
    return result.valid and agreement is not None and agreement.agrees


def checked_step(seed: int) -> StepResult:
    """One step, with what must hold however busy the machine asserted."""
    result = one_step(seed)
    print(f"\nattempt {seed + 1}: " + render_text(summarise(result)))
    assert all(r.ok for r in result.records), {r.error for r in result.records}
    assert {r.output_tokens for r in result.records} == {16}, "ignore_eos and usage: exactly 16 tokens"
    assert result.engine_samples, "the engine's /metrics were sampled"
    agreement = ttft_agreement(result)
    assert agreement is not None, "the engine's TTFT histogram moved over the step"
    # The engine's span (arrival to first token) lies inside the client's (send to receipt): the
    # client can never see a P99 below the engine's P99 bucket, however busy the machine.
    assert agreement.client_p99_s >= agreement.bucket[0], agreement
    return result


def test_a_short_run_completes_and_agrees_with_the_engine_histogram() -> None:
    results = until_holds(checked_step, agrees, first_seed=0)
    if agrees(results[-1]):
        return
    found = [(r.invalid_reason, ttft_agreement(r)) for r in results]
    pressure = cpu_pressure()
    if pressure > BUSY_CPU_PRESSURE or not any(r.valid for r in results):
        # Tasks waited for a CPU much of the time: the client's and the server front end's queueing
        # for it, not the engine, sets the client's tail. The run itself completed (asserted above).
        pytest.skip(f"CPU pressure {pressure:.0f} % (PSI avg10): no comparison of tails; measured {found}")
    raise AssertionError(f"no valid attempt had the client's P99 TTFT in the engine's P99 bucket: {found}")
