"""Bayesian search against the full grid on the simulated engine, random search beside it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from servescope.kit.load.records import LoopMode, StepResult
from servescope.kit.tune.cli import SimulatedLauncher
from servescope.kit.tune.space import load_space
from servescope.kit.tune.strategies import run_study
from servescope_sim.load_runner import SimulatedStepRunner, start_simulated

SPACE = Path(__file__).with_name("space-small.yaml")


@dataclass
class RememberedSteps:
    """The simulated engine with its steps remembered. It answers one step (its configuration, rate,
    length and seed) the same way every time, so the six studies after the grid need simulate only the
    steps no earlier study ran; `hits` counts the others."""

    steps: dict[tuple[object, ...], StepResult] = field(default_factory=dict)
    hits: int = 0

    def __call__(
        self, params: Mapping[str, object], *, mode: LoopMode = "open", warmup_s: float = 5.0
    ) -> RememberedRunner:
        return RememberedRunner(start_simulated(params, mode=mode, warmup_s=warmup_s), self)


@dataclass
class RememberedRunner:
    runner: SimulatedStepRunner
    memory: RememberedSteps

    def run_step(self, offered: float, duration_s: float, *, seed: int) -> StepResult:
        key = (self.runner.config, self.runner.mode, self.runner.warmup_s, offered, duration_s, seed)
        if key in self.memory.steps:
            self.memory.hits += 1
        else:
            self.memory.steps[key] = self.runner.run_step(offered, duration_s, seed=seed)
        return self.memory.steps[key]


def test_a_remembered_step_is_the_step_simulated_again() -> None:
    memory = RememberedSteps()
    first = memory({}, warmup_s=2.0).run_step(20.0, 5.0, seed=3)
    assert memory({}, warmup_s=2.0).run_step(20.0, 5.0, seed=3) is first and memory.hits == 1
    assert start_simulated({}, warmup_s=2.0).run_step(20.0, 5.0, seed=3) == first


@pytest.mark.slow
def test_bayes_with_40_percent_of_the_grid_gets_within_5_percent_of_its_best() -> None:
    space = load_space(SPACE)
    memory = RememberedSteps()
    launcher = SimulatedLauncher(space.warmup_s, memory)
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
    print(f"{len(memory.steps)} steps simulated, {memory.hits} remembered")
    assert all(found["bayes", seed] >= 0.95 for seed in range(3)), found
