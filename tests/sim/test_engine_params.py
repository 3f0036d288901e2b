"""The simulated engine answers to vLLM's serving flags as engine_params.py writes down."""

from __future__ import annotations

import math

import pytest

from servescope.kit.capacity.steps import Slo, summarise
from servescope_sim.engine_config import EngineConfig, effective
from servescope_sim.engine_params import EngineStartError
from servescope_sim.load_runner import SimulatedStepRunner, start_simulated
from servescope_sim.vllm_engine import SimulatedEngine

SLOS = (Slo("ttft", 0.5),)
MIXED = {"prompt_tokens": 1500, "prompt_sigma": 1.2, "max_num_batched_tokens": 2048}


def _p(config: EngineConfig, rate: float, key: str, seeds: tuple[int, ...] = (1, 2, 3)) -> float:
    """Median over seeds of a step percentile at `rate` (60 s open-loop steps)."""
    values = sorted(
        summarise(SimulatedStepRunner(config).run_step(rate, 60, seed=s), SLOS, s).percentiles[key]
        for s in seeds
    )
    return values[len(values) // 2]


def _engine_p99_bucket(config: EngineConfig, histogram: str, seed: int) -> float:
    engine = SimulatedEngine(config, seed=seed)
    engine.advance_to(120)
    h = engine.stats.histograms[histogram]
    running = 0
    for bound, n in zip((*h.bounds, math.inf), h.counts, strict=True):
        running += n
        if running >= 0.99 * h.count:
            return bound
    return math.inf


def test_default_flags_leave_the_engine_as_it_was() -> None:
    config = EngineConfig()
    flags = effective(config)
    assert flags.num_gpu_blocks == config.num_gpu_blocks
    assert config.cost.scaled(flags) is config.cost


def test_quantization_makes_steps_faster_and_the_kv_pool_larger() -> None:
    base, fp8 = effective(EngineConfig()), effective(EngineConfig(quantization="fp8"))
    assert fp8.weight_read == 0.62 and fp8.prefill_compute == 0.70
    assert fp8.num_gpu_blocks / base.num_gpu_blocks == pytest.approx((0.9 - 0.29 - 0.05) / 0.30, rel=1e-3)
    assert _p(EngineConfig(quantization="fp8"), 12, "p99_ttft") < 0.7 * _p(EngineConfig(), 12, "p99_ttft")


def test_fp8_kv_cache_doubles_the_blocks() -> None:
    assert effective(EngineConfig(kv_cache_dtype="fp8")).num_gpu_blocks == 2 * 65_536


@pytest.mark.parametrize("utilization", [0.97, 1.0, 0.6])
def test_memory_utilization_out_of_reach_fails_at_start(utilization: float) -> None:
    with pytest.raises(EngineStartError, match=f"gpu_memory_utilization {utilization}"):
        start_simulated({"gpu_memory_utilization": utilization})


def test_a_larger_pool_holds_more_blocks() -> None:
    assert effective(EngineConfig(gpu_memory_utilization=0.95)).num_gpu_blocks > 65_536


def test_bad_flag_values_are_named() -> None:
    with pytest.raises(ValueError, match="scheduling_policy must be one of"):
        EngineConfig(scheduling_policy="lifo")
    with pytest.raises(ValueError, match="not a simulated engine flag: batch"):
        start_simulated({"batch": 8})


def test_batch_limit_trades_latency_for_throughput() -> None:
    # As the operators measured: as many closed-loop clients as the batch holds.
    def step(limit: int) -> tuple[float, float]:
        result = SimulatedStepRunner(EngineConfig(max_num_seqs=limit), mode="closed").run_step(
            limit, 120, seed=1
        )
        summary = summarise(result, SLOS, 1)
        return summary.throughput_tokens, summary.percentiles["p99_tpot"]

    (tokens_1, tpot_1), (tokens_8, tpot_8) = step(1), step(8)
    assert 3.0 < tokens_8 / tokens_1 < 3.8  # the model's 3.39x
    assert 2.0 < tpot_8 / tpot_1 < 2.6  # +137 % per token


def test_chunked_prefill_lowers_the_inter_token_tail_under_mixed_prompts() -> None:
    # A 8k-token prompt prefilled whole stalls every decode for its whole step; chunks bound the step.
    load = {**MIXED, "arrival_rate": 5.0}
    whole = [_engine_p99_bucket(EngineConfig(**load), "inter_token_latency_seconds", s) for s in (1, 2, 3)]
    chunked = [
        _engine_p99_bucket(
            EngineConfig(**load, enable_chunked_prefill=True), "inter_token_latency_seconds", s
        )
        for s in (1, 2, 3)
    ]
    assert max(chunked) < min(whole)


def test_chunked_prefill_with_a_small_budget_costs_ttft_for_long_prompts() -> None:
    # The honest other side: each extra chunk pays a whole decode step, so long prompts start later.
    assert _p(EngineConfig(**MIXED, enable_chunked_prefill=True), 4, "p99_ttft") > _p(
        EngineConfig(**MIXED), 4, "p99_ttft"
    )


def test_shortest_prompt_first_lowers_the_median_and_starves_the_tail_near_capacity() -> None:
    fcfs, sjf = EngineConfig(**MIXED), EngineConfig(**MIXED, scheduling_policy="priority")
    assert _p(sjf, 8, "p50_ttft") < 0.7 * _p(fcfs, 8, "p50_ttft")
    assert _p(sjf, 8, "p99_ttft") > _p(fcfs, 8, "p99_ttft")


def test_prefix_caching_off_computes_every_prompt_token() -> None:
    engine = SimulatedEngine(EngineConfig(arrival_rate=4, enable_prefix_caching=False), seed=1)
    engine.advance_to(30)
    assert engine.stats.prefix_queries > 0 and engine.stats.prefix_hits == 0


def test_constant_arrivals_are_evenly_spaced() -> None:
    result = SimulatedStepRunner(EngineConfig(arrival_pattern="constant")).run_step(4, 10, seed=1)
    gaps = {
        round(b.scheduled_s - a.scheduled_s, 9)
        for a, b in zip(result.records, result.records[1:], strict=False)
    }
    assert gaps == {0.25}
