"""Capacity on the simulated engine: overload is never a knee, coordinated omission, pruning.

The knee's accuracy and its interval's coverage are measured against a computed truth in
tests/capacity/test_knee_truth.py (and over HTTP in test_knee_http.py)."""

from __future__ import annotations

import pytest

from servescope.kit.capacity.search import SearchPlan, find_knee
from servescope.kit.capacity.steps import Slo, summarise
from servescope_sim.engine_config import EngineConfig
from servescope_sim.load_runner import SimulatedStepRunner

SLOS = (Slo("ttft", 0.5),)
STEP_S = 20.0


def test_an_overloaded_open_loop_step_is_backlog_and_never_a_knee() -> None:
    step = summarise(SimulatedStepRunner(EngineConfig()).run_step(24, 60, seed=1), SLOS, 1)
    assert step.status == "overloaded" and step.verdict == "miss" and not step.meets
    # The closed loop with the engine's whole batch of clients sends only what the engine lets it.
    closed = SimulatedStepRunner(EngineConfig(), mode="closed").run_step(256, 60, seed=1)
    summary = summarise(closed, SLOS, 1)
    assert summary.status == "valid" and summary.percentiles["p99_ttft"] < 0.5
    assert closed.achieved_rate < 16


def test_at_the_same_rate_a_closed_loop_reports_the_lower_p99_of_coordinated_omission() -> None:
    closed = SimulatedStepRunner(EngineConfig(), mode="closed").run_step(64, 60, seed=1)
    rate = closed.achieved_rate
    open_loop = SimulatedStepRunner(EngineConfig()).run_step(rate, 60, seed=1)
    closed_p99 = summarise(closed, SLOS, 1).percentiles["p99_ttft"]
    open_p99 = summarise(open_loop, SLOS, 1).percentiles["p99_ttft"]
    assert open_p99 > 1.3 * closed_p99


@pytest.mark.slow
def test_a_search_that_cannot_beat_the_best_stops_early_and_names_the_step() -> None:
    runner = SimulatedStepRunner(EngineConfig(max_num_seqs=16))
    full = find_knee(runner, SearchPlan(SLOS, duration_s=STEP_S, repeats=1))
    assert full.status == "measured" and full.estimate is not None
    pruned = find_knee(runner, SearchPlan(SLOS, duration_s=STEP_S, repeats=3), stop_below=full.estimate * 2)
    assert pruned.pruned and len(pruned.steps) < len(full.steps)
    assert pruned.pruned_by is not None and "req/s" in pruned.pruned_by
