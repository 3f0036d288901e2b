"""A capacity sweep against a REAL vLLM (CPU build, tiny model) over HTTP: `servescope capacity --url`.

A small budget (one repeat, steps of a few seconds, rates 0.5 to 4 req/s): the search completes, every
step it took holds answered requests with tokens, and each step's engine TTFT histogram was read for
the client-versus-engine cross-check. CI starts the server and sets SERVESCOPE_TEST_VLLM_URL.
"""

from __future__ import annotations

from servescope.kit.capacity.runners import checked_http_runner
from servescope.kit.capacity.search import SearchPlan, find_knee
from servescope.kit.capacity.steps import Slo
from tests.helpers import NEEDS_SHARED_VLLM, VLLM_URL

pytestmark = NEEDS_SHARED_VLLM


def test_a_capacity_sweep_against_the_real_engine_completes() -> None:
    plan = SearchPlan(
        (Slo("ttft", 0.5),), duration_s=4.0, repeats=1, start_qps=0.5, max_qps=4.0, resolution=0.25
    )
    knee = find_knee(checked_http_runner(VLLM_URL), plan)
    print(f"real vLLM knee {knee.estimate:.2f} req/s in [{knee.lower:.2f}, {knee.upper:.2f}]")
    for step in knee.steps:
        print(f"  {step.offered:.2f} req/s: {'meets' if step.meets else 'misses'} {step.backlog or ''}")
    assert len(knee.steps) >= 2
    for result in knee.raw:
        answered = [record for record in result.records if record.ok]
        assert answered, f"no request answered at {result.offered} req/s"
        assert all(record.output_tokens > 0 for record in answered)
        assert result.engine_ttft_buckets, f"the engine's TTFT histogram was not read at {result.offered}"
