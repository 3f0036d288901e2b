"""Bayesian search against the full grid on the simulated engine, random search beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from servescope.kit.tune.cli import SimulatedLauncher
from servescope.kit.tune.space import load_space
from servescope.kit.tune.strategies import run_study
from servescope_sim.load_runner import start_simulated

SPACE = Path(__file__).with_name("space-small.yaml")


@pytest.mark.slow
def test_bayes_with_40_percent_of_the_grid_gets_within_5_percent_of_its_best() -> None:
    space = load_space(SPACE)
    launcher = SimulatedLauncher(space.warmup_s, start_simulated)
    grid = run_study(space, launcher, "grid")
    best = max(t.objective for t in grid.trials)
    budget = int(0.39 * len(grid.trials))  # 24 of 64
    found = {}
    for strategy in ("bayes", "random"):
        for seed in range(3):
            study = run_study(space, launcher, strategy, budget=budget, seed=seed)
            assert len(study.trials) == budget
            found[strategy, seed] = max(t.objective for t in study.trials) / best
    print(f"grid best {best:.2f} req/s; share of it found with {budget} starts:", found)
    assert all(found["bayes", seed] >= 0.95 for seed in range(3)), found
