"""Studies on the simulated engine: infeasible starts, pruning, strategies, resumable Bayesian studies."""

from __future__ import annotations

from pathlib import Path

from servescope.kit.tune.cli import SimulatedLauncher
from servescope.kit.tune.space import Space, parse_space
from servescope.kit.tune.strategies import run_study
from servescope.kit.tune.trials import Trial, pareto_front
from servescope_sim.load_runner import start_simulated
from tests.tune.searches import short_capacity


def tiny() -> Space:
    return parse_space(
        {
            "engine": {"num_gpu_blocks": 8192},
            "parameters": {"max_num_seqs": [16, 64, 256], "gpu_memory_utilization": [0.9, 0.98]},
            "second_objective": "gpus",
            "peak_qps": 50,
            "capacity": short_capacity(10, "ttft:0.5", warmup_s=2),
        }
    )


def test_a_start_that_fails_is_an_infeasible_trial_not_a_crash() -> None:
    study = run_study(tiny(), SimulatedLauncher(2.0, start_simulated), "grid", prune=False)
    states = {(t.params["max_num_seqs"], t.params["gpu_memory_utilization"]): t for t in study.trials}
    assert len(states) == 6
    for seqs in (16, 64, 256):
        failed = states[seqs, 0.98]
        assert failed.state == "infeasible" and failed.objective == 0.0
        assert "0.98 asks for more than the 0.96" in (failed.reason or "")
        assert states[seqs, 0.9].state == "complete" and states[seqs, 0.9].objective > 0
    knees = [states[s, 0.9].objective for s in (16, 64, 256)]
    assert knees == sorted(knees) and knees[0] < knees[-1]  # the batch limit caps capacity


def test_pruning_stops_a_trial_that_already_failed_below_the_best() -> None:
    space = parse_space(
        {
            "engine": {"num_gpu_blocks": 8192},
            "parameters": {"max_num_seqs": [256, 16]},  # the best first: the second cannot win
            "capacity": short_capacity(10, warmup_s=2),
        }
    )
    pruned = run_study(space, SimulatedLauncher(2.0, start_simulated), "grid", prune=True)
    full = run_study(space, SimulatedLauncher(2.0, start_simulated), "grid", prune=False)
    assert [t.state for t in pruned.trials] == ["complete", "pruned"]
    assert pruned.trials[1].steps < full.trials[1].steps
    assert pruned.best is not None and pruned.best.params == {"max_num_seqs": 256}


def test_random_search_samples_without_replacement_and_remeasures_the_top() -> None:
    study = run_study(
        tiny(), SimulatedLauncher(2.0, start_simulated), "random", budget=5, seed=3, prune=False, remeasure=2
    )
    keys = [tuple(sorted(t.params.items())) for t in study.trials]
    assert len(keys) == len(set(keys)) == 5
    assert len(study.remeasured) == 2
    assert {t.number for t in study.remeasured} <= {t.number for t in study.trials}


def test_a_bayesian_study_in_sqlite_resumes_without_measuring_again(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'tune.db'}"
    first = run_study(
        tiny(), SimulatedLauncher(2.0, start_simulated), "bayes", budget=3, storage=storage, seed=1
    )
    again = run_study(
        tiny(), SimulatedLauncher(2.0, start_simulated), "bayes", budget=3, storage=storage, seed=1
    )
    measured = [tuple(sorted(t.params.items())) for t in (*first.trials, *again.trials)]
    assert len(first.trials) == 3 and len(again.trials) == 3
    assert len(set(measured)) == 6  # the resumed study starts only configurations not yet measured


def test_the_pareto_front_keeps_only_undominated_trials() -> None:
    trials = [
        Trial(0, {"a": 1}, "complete", objective=10, second=8),
        Trial(1, {"a": 2}, "complete", objective=12, second=8),  # beats 0
        Trial(2, {"a": 3}, "complete", objective=8, second=4),
        Trial(3, {"a": 4}, "infeasible", objective=0, second=None),
    ]
    assert [t.number for t in pareto_front(trials)] == [2, 1]
