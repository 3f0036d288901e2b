"""Capacity on the simulated engine: the knee interval, backlog detection, coordinated omission."""

from __future__ import annotations

import pytest

from servescope.kit.capacity.search import SearchPlan, find_knee
from servescope.kit.capacity.steps import Slo, summarise
from servescope_sim.engine_config import EngineConfig
from servescope_sim.load_runner import SimulatedStepRunner

SLOS = (Slo("ttft", 0.5),)
STEP_S = 20.0


def sweep_knee(runner: SimulatedStepRunner, seed: int, low: float, high: float, step: float) -> float:
    """The exhaustive answer: the last rate of a fine sweep before its first failing step."""
    rate, last_pass = low, 0.0
    while rate <= high:
        if not summarise(runner.run_step(rate, STEP_S, seed=seed), SLOS, seed).meets:
            return last_pass
        last_pass, rate = rate, rate + step
    raise AssertionError(f"no failing step up to {high} req/s")


@pytest.mark.slow
def test_the_knee_interval_holds_the_knee_of_an_exhaustive_fine_sweep() -> None:
    runner = SimulatedStepRunner(EngineConfig())
    knee = find_knee(runner, SearchPlan(SLOS, duration_s=STEP_S, repeats=3))
    assert knee.lower <= knee.estimate <= knee.upper
    assert knee.upper - knee.lower < 0.25 * knee.estimate
    for seed in range(3):
        exhaustive = sweep_knee(runner, seed, 10.0, 24.0, 0.25)
        assert knee.lower <= exhaustive <= knee.upper, (seed, exhaustive, knee.lower, knee.upper)


def test_an_overloaded_open_loop_step_is_backlog_and_never_a_knee() -> None:
    step = summarise(SimulatedStepRunner(EngineConfig()).run_step(24, 60, seed=1), SLOS, 1)
    assert step.backlog is not None and not step.meets
    # The closed loop with the engine's whole batch of clients sends only what the engine lets it.
    closed = SimulatedStepRunner(EngineConfig(), mode="closed").run_step(256, 60, seed=1)
    summary = summarise(closed, SLOS, 1)
    assert summary.backlog is None and summary.percentiles["p99_ttft"] < 0.5
    assert closed.achieved_rate < 16


def test_at_the_same_rate_a_closed_loop_reports_the_lower_p99_of_coordinated_omission() -> None:
    closed = SimulatedStepRunner(EngineConfig(), mode="closed").run_step(64, 60, seed=1)
    rate = closed.achieved_rate
    open_loop = SimulatedStepRunner(EngineConfig()).run_step(rate, 60, seed=1)
    closed_p99 = summarise(closed, SLOS, 1).percentiles["p99_ttft"]
    open_p99 = summarise(open_loop, SLOS, 1).percentiles["p99_ttft"]
    assert open_p99 > 1.3 * closed_p99


def test_a_search_that_cannot_beat_the_best_stops_early() -> None:
    runner = SimulatedStepRunner(EngineConfig(max_num_seqs=16))
    full = find_knee(runner, SearchPlan(SLOS, duration_s=STEP_S, repeats=1))
    pruned = find_knee(runner, SearchPlan(SLOS, duration_s=STEP_S, repeats=3), stop_below=full.upper * 2)
    assert pruned.pruned and len(pruned.steps) < len(full.steps)
    assert pruned.upper <= full.upper * 2
