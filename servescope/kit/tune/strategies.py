"""Search strategies over a space: grid, random (without replacement) and Bayesian (Optuna TPE).

The budget counts engine starts: a configuration measured once is never measured again by the same
study (TPE may propose it twice; the second time reuses the first answer and costs no start). Bayesian
studies live in Optuna storage (SQLite with `storage`), so an interrupted study resumes where it
stopped. After the search, the top candidates are measured again with fresh seeds and the winner is
chosen on those numbers, so a lucky draw does not crown a configuration; a pruned trial whose pruning
rate still lies above the best's lower bound is a candidate too (its early miss may have been the
draw's), and so is a client-bound one. Configurations whose knee intervals overlap the best's are
named as tied with it: the measurement cannot tell them apart. Asked (`compare_random`), a Bayesian
study is followed by a random one with the same budget, and the report sets their progress side by side.
"""

from __future__ import annotations

import logging
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from servescope.kit.tune.launchers import Launcher
from servescope.kit.tune.space import Space, Value
from servescope.kit.tune.trials import Trial, run_trial
from servescope.kit.tune.v1 import check_space

Strategy = Literal["grid", "random", "bayes"]
REMEASURE_SEED_OFFSET = 1000
STARTUP = 3


@dataclass(slots=True)
class Study:
    """Every trial in order, the top candidates measured again, and the random baseline when asked."""

    strategy: Strategy
    space: Space
    trials: list[Trial] = field(default_factory=list)
    remeasured: list[Trial] = field(default_factory=list)
    random_trials: list[Trial] = field(default_factory=list)  # compare_random: the same budget, random

    @property
    def best(self) -> Trial | None:
        pool = self.remeasured or [t for t in self.trials if t.state == "complete"]
        return max(pool, key=lambda t: t.objective, default=None)

    def tied(self) -> list[Trial]:
        """The best and every candidate whose knee interval overlaps its interval, best first."""
        best = self.best
        if best is None:
            return []
        pool = self.remeasured or [t for t in self.trials if t.state == "complete"]
        _, low, high = best.knee
        ties = [
            t for t in pool if t is not best and t.knee[1] <= high and low <= t.knee[2] and t.objective > 0
        ]
        return [best, *sorted(ties, key=lambda t: -t.objective)]

    def best_so_far(self) -> float:
        return max((t.objective for t in self.trials if t.state == "complete"), default=0.0)


def _key(params: dict[str, Value]) -> tuple[tuple[str, Value], ...]:
    return tuple(sorted(params.items()))


def run_study(
    space: Space,
    launcher: Launcher,
    strategy: Strategy,
    *,
    budget: int | None = None,
    seed: int = 0,
    prune: bool = True,
    remeasure: int = 0,
    storage: str | None = None,
    study_name: str = "servescope-tune",
    on_trial: Callable[[Trial], None] | None = None,
    compare_random: bool = False,
) -> Study:
    """Search `space` with `strategy` for at most `budget` engine starts."""
    check_space(space)
    study = Study(strategy, space)

    def evaluate(params: dict[str, Value]) -> Trial:
        best = study.best_so_far()
        stop_below = best if prune and best > 0 and space.objective == "knee" else None
        trial = run_trial(space, launcher, params, len(study.trials), stop_below=stop_below)
        study.trials.append(trial)
        if on_trial is not None:
            on_trial(trial)
        return trial

    if strategy == "bayes":
        _bayes(space, evaluate, budget or space.size(), seed, storage=storage, study_name=study_name)
    else:
        grid = list(space.grid())
        if strategy == "random":
            grid = random.Random(seed).sample(grid, len(grid))
        for params in grid[: budget or len(grid)]:
            evaluate(params)
    _remeasure(study, launcher, remeasure)
    if compare_random and strategy != "random":
        baseline = run_study(space, launcher, "random", budget=len(study.trials), seed=seed, prune=prune)
        study.random_trials = baseline.trials
    return study


def candidates(study: Study) -> list[Trial]:
    """What may be measured again, most promising first: complete trials by objective, pruned ones by
    the rate that pruned them where it lies above the best's lower bound, client-bound ones last."""
    complete = [t for t in study.trials if t.state == "complete"]
    best_low = max((t.knee[1] for t in complete if t.objective == study.best_so_far()), default=0.0)
    pruned = [t for t in study.trials if t.state == "pruned" and t.knee[2] > best_low]
    ranked = sorted(
        [*complete, *pruned], key=lambda t: -(t.objective if t.state == "complete" else t.knee[2])
    )
    return ranked + [t for t in study.trials if t.state == "client_bound"]


def _remeasure(study: Study, launcher: Launcher, top: int) -> None:
    for trial in candidates(study)[:top]:
        again = run_trial(
            study.space, launcher, trial.params, trial.number, seed_offset=REMEASURE_SEED_OFFSET
        )
        study.remeasured.append(again)


def _bayes(
    space: Space,
    evaluate: Callable[[dict[str, Value]], Trial],
    budget: int,
    seed: int,
    *,
    storage: str | None,
    study_name: str,
) -> None:
    import optuna  # an optional dependency (the `tune` extra), needed by this strategy only

    optuna.logging.set_verbosity(logging.WARNING)
    with warnings.catch_warnings():  # multivariate TPE (which learns flag interactions) is "experimental"
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=STARTUP, multivariate=True)
    study = optuna.create_study(
        direction="maximize", sampler=sampler, storage=storage, study_name=study_name, load_if_exists=True
    )
    seen: dict[tuple[tuple[str, Value], ...], float] = {}
    for done in study.trials:  # a resumed study: its configurations were measured already
        if done.value is not None:
            seen[_key(done.user_attrs.get("params", {}))] = done.value
    starts, size = 0, space.size()
    # TPE may propose a configuration again: allow some repeats beyond the budget of starts.
    for _ in range(budget * 4):
        if starts >= budget or len(seen) >= size:
            break
        ask = study.ask()
        params = _suggest(space, ask)
        key = _key(params)
        if key not in seen:
            trial = evaluate(params)
            starts += 1
            seen[key] = trial.objective
        ask.set_user_attr("params", params)
        study.tell(ask, seen[key])


def _suggest(space: Space, ask: Any) -> dict[str, Value]:
    chosen: dict[str, Value] = {}
    for parameter in space.parameters:
        if parameter.applies(chosen):
            chosen[parameter.name] = ask.suggest_categorical(parameter.name, list(parameter.values))
    return chosen
