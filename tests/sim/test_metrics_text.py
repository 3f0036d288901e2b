"""The one renderer of a simulated engine's /metrics is byte for byte prometheus_client's rendering."""

from __future__ import annotations

import pytest
from prometheus_client.exposition import generate_latest

from servescope_sim.vllm_engine import EngineConfig, SimulatedEngine
from servescope_sim.vllm_metrics import GENERATIONS, EngineCollector, Generation, MetricsText, render_metrics


def _reference(engine: SimulatedEngine, generation: Generation) -> str:
    return generate_latest(EngineCollector(engine, generation)).decode()


@pytest.mark.parametrize("generation", GENERATIONS)
def test_the_text_is_what_generate_latest_makes_of_the_same_families(generation: Generation) -> None:
    engine = SimulatedEngine(EngineConfig(arrival_rate=2.0, num_gpu_blocks=2_000), seed=3, model_name='m"\\x')
    text = MetricsText()  # kept across scrapes, as the benchmarks keep it
    for t in (0.0, 60.0):
        engine.advance_to(t)
        assert text.render(engine, generation) == _reference(engine, generation)
    engine.set_load(concurrency=30, prompt_tokens=1500, output_tokens=400)  # preempts: more series
    engine.advance_to(240.0)
    assert engine.stats.preemptions > 0
    assert text.render(engine, generation) == _reference(engine, generation)
    assert render_metrics(engine, generation) == _reference(engine, generation)


def test_an_unknown_generation_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown generation 'v2'"):
        render_metrics(SimulatedEngine(EngineConfig(), seed=1), "v2")  # type: ignore[arg-type]
