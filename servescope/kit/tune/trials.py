"""One trial: start the engine with a configuration, search its knee, stop it; and the Pareto front.

Every trial measures with the same seeds (common random numbers: two configurations see the same
arrivals and lengths), so differences between trials are the configuration's, not the draw's. A start
that fails, or a configuration vLLM V1 cannot start (tune/v1.py), is an infeasible trial (objective 0)
with its reason, never an exception out of the study; so is an engine that fails most requests. A knee
search whose first failing rate already lies below the best knee so far is pruned, naming the step that
pruned it. A trial whose client could not drive a step is `client_bound`: not the configuration's
verdict, so it is never a best and it may be measured again.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from servescope.kit.capacity.result import CapacityRun, build_run
from servescope.kit.capacity.search import Knee, find_knee
from servescope.kit.capacity.sizing import provision
from servescope.kit.tune.launchers import Launcher, LaunchError
from servescope.kit.tune.space import Space, Value
from servescope.kit.tune.v1 import cannot_start

State = Literal["complete", "infeasible", "pruned", "client_bound"]


@dataclass(slots=True)
class Trial:
    """What one configuration gave."""

    number: int
    params: dict[str, Value]
    state: State
    objective: float = 0.0
    second: float | None = None
    knee: tuple[float, float, float] = (0.0, 0.0, 0.0)  # estimate, lower, upper
    reason: str | None = None
    seconds: float = 0.0
    steps: int = 0
    run: CapacityRun | None = None  # kept for the report's curves

    @property
    def label(self) -> str:
        return _label(self.params)


def objective_of(space: Space, knee: Knee) -> float:
    """The knee estimate, or the best goodput among the steps that met the SLOs."""
    if space.objective == "knee":
        if knee.estimate is None and knee.reached_max:  # every step met the SLO: at least that much
            return max((step.offered for step in knee.steps if step.meets), default=0.0)
        return knee.estimate or 0.0
    return max((step.goodput for step in knee.steps if step.meets), default=0.0)


def second_of(space: Space, knee: Knee) -> float | None:
    """GPUs (or their hourly cost) to serve the space's peak with a 20 % buffer; None when not asked."""
    if space.second_objective is None:
        return None
    if knee.lower <= 0:
        return float("inf")
    gpus = provision(space.peak_qps, knee.lower, gpus_per_replica=space.gpus_per_replica).gpus
    return float(gpus) if space.second_objective == "gpus" else gpus * space.gpu_hour_cost


def run_trial(
    space: Space,
    launcher: Launcher,
    params: Mapping[str, Value],
    number: int,
    *,
    stop_below: float | None = None,
    seed_offset: int = 0,
) -> Trial:
    """Measure one configuration; see the module docstring."""
    # One piece: the launcher started is stopped by one finally, whatever the search does.
    started = time.monotonic()
    chosen = dict(params)
    refused = cannot_start({**space.engine, **chosen})
    if refused is not None:
        return Trial(number, chosen, "infeasible", reason=refused)
    try:
        runner = launcher.start({**space.engine, **chosen})
    except (LaunchError, ValueError) as err:
        launcher.stop()
        return Trial(number, chosen, "infeasible", reason=str(err), seconds=time.monotonic() - started)
    try:
        plan = replace(space.plan, seed=space.plan.seed + seed_offset)
        knee = find_knee(runner, plan, stop_below=stop_below)
    finally:
        launcher.stop()
    seconds = time.monotonic() - started
    sizing = (
        provision(space.peak_qps, knee.lower, gpus_per_replica=space.gpus_per_replica)
        if knee.lower > 0
        else None
    )
    run = build_run(_label(chosen), plan, knee, sizing)
    trial = Trial(number, chosen, _state(knee), seconds=seconds, steps=len(knee.steps))
    trial.knee, trial.run = (knee.estimate or 0.0, knee.lower, knee.upper), run
    trial.objective, trial.second = objective_of(space, knee), second_of(space, knee)
    if knee.pruned:
        trial.reason = (
            f"pruned by its step at {knee.pruned_by}, below the best knee so far ({stop_below:.2f})"
        )
    elif knee.status != "measured":
        trial.reason = knee.message
    return trial


def _state(knee: Knee) -> State:
    if knee.pruned:
        return "pruned"
    if knee.status == "client_bound":
        return "client_bound"
    return "infeasible" if knee.status == "engine_failed" else "complete"


def _label(params: Mapping[str, Value]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "defaults"


def pareto_front(trials: Sequence[Trial]) -> list[Trial]:
    """Complete trials no other beats on both objectives (higher objective, lower second)."""
    scored = [t for t in trials if t.state == "complete" and t.second is not None]
    front = []
    for trial in scored:
        assert trial.second is not None
        dominated = any(
            other.objective >= trial.objective
            and other.second is not None
            and other.second <= trial.second
            and (other.objective > trial.objective or other.second < trial.second)
            for other in scored
        )
        if not dominated:
            front.append(trial)
    return sorted(front, key=lambda t: t.objective)
