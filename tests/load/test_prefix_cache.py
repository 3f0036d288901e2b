"""A search's steps send prompts the engine has not seen: an engine that caches prefixes (the mock keeps
every prompt it was sent, as vLLM keeps their blocks) answers none of them from its cache, so a later
step's prefill is not made free by an earlier step's requests."""

from __future__ import annotations

import pytest

from servescope.kit.load.endpoint import EndpointStepRunner
from servescope.kit.load.schedule import step_prompts_seed
from servescope.kit.load.workload import Workload
from servescope_sim.mock_process import mock_process
from servescope_sim.mock_server import MockConfig
from tests.support.engine_page import counter_total

PROMPT_TOKENS = 32  # two full blocks of 16: a repeated prompt hits in all of its tokens


def _prefix_cache(base_url: str) -> tuple[float, float]:
    """(queried, hit) prompt tokens, from the engine's own /metrics."""
    return counter_total(base_url, "prefix_cache_queries"), counter_total(base_url, "prefix_cache_hits")


def test_each_rate_of_one_seed_draws_its_own_prompts() -> None:
    workload = Workload(prompt_tokens=PROMPT_TOKENS)
    seeds = {step_prompts_seed(seed, rate) for seed in (0, 1) for rate in (8.0, 16.0, 12.0, 12.5)}
    assert len(seeds) == 8
    prompts = [
        {shape.prompt for shape in workload.sample(200, step_prompts_seed(0, rate))} for rate in (8.0, 16.0)
    ]
    assert prompts[0].isdisjoint(prompts[1])
    assert step_prompts_seed(3, 8.0) == step_prompts_seed(3, 8.0)  # the same step asks the same again
    # A result from before, whose steps re-sent each other's prompts, does not compare with one from now.
    assert workload.describe()["prompts"] == "per step"


@pytest.mark.e2e
def test_a_prefix_caching_engine_answers_no_step_of_a_search_from_its_cache() -> None:
    with mock_process(MockConfig(slots=16, ttft_s=0.005, token_s=0.001)) as engine:
        runner = EndpointStepRunner(
            engine.base_url, workload=Workload(prompt_tokens=PROMPT_TOKENS, output_tokens=2)
        )
        # The doubling's steps, all with the search's one seed.
        for rate in (10.0, 20.0, 40.0):
            assert runner.run_step(rate, 1.5, seed=0).records
        queried, hit = _prefix_cache(engine.base_url)
        assert queried >= PROMPT_TOKENS * 50 and hit == 0, (queried, hit)
        # The mock does count a prompt sent again: the same step once more is answered from its cache.
        runner.run_step(10.0, 1.5, seed=0)
        _, hit_again = _prefix_cache(engine.base_url)
    assert hit_again >= PROMPT_TOKENS * 10, hit_again
