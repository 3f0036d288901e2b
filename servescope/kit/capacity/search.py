"""The knee: the highest offered rate whose step meets every SLO, by exponential bracket then bisection.

Each repeat (its own seed) doubles the rate from `start_qps` until a step fails (misses an SLO, is
backlogged or invalid), then bisects between the last pass and the first failure until the interval is
narrower than `resolution` of its upper end. The knee's interval is the envelope of the repeats'
brackets, [min pass, max fail]; its estimate the median of the repeats' last passes. With `stop_below`,
a search whose first failure already lies below it stops early (a tuning trial that cannot win).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from servescope.kit.capacity.steps import Slo, StepSummary, summarise
from servescope.kit.load.records import StepResult, StepRunner

MAX_STEPS_PER_REPEAT = 40


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """How to search: SLOs, step length, repeats and the bisection's resolution."""

    slos: tuple[Slo, ...]
    duration_s: float = 30.0
    repeats: int = 3
    start_qps: float = 1.0
    max_qps: float = 1024.0
    resolution: float = 0.05  # stop bisecting once the bracket is narrower than this share of its top
    seed: int = 0  # of the first repeat; repeat r runs with seed + r

    def __post_init__(self) -> None:
        if not self.slos:
            raise ValueError("a capacity search needs at least one SLO")
        if self.repeats < 1 or not 0 < self.start_qps <= self.max_qps or not 0 < self.resolution < 1:
            raise ValueError(
                f"repeats must be >= 1, 0 < start_qps <= max_qps and 0 < resolution < 1, got {self}"
            )


@dataclass(slots=True)
class Knee:
    """The knee with its interval, the steps that found it, and the raw steps kept for comparison."""

    estimate: float
    lower: float
    upper: float
    repeats: list[tuple[float, float]]  # each repeat's (last pass, first failure)
    steps: list[StepSummary] = field(default_factory=list)
    raw: list[StepResult] = field(default_factory=list)
    pruned: bool = False
    reached_max: bool = False


def find_knee(
    runner: StepRunner,
    plan: SearchPlan,
    *,
    stop_below: float | None = None,
    on_step: Callable[[StepSummary], None] | None = None,
) -> Knee:
    """Search the knee of `runner` under `plan`; see the module docstring."""
    knee = Knee(0.0, 0.0, 0.0, [])

    def measure(rate: float, seed: int) -> bool:
        result = runner.run_step(rate, plan.duration_s, seed=seed)
        summary = summarise(result, plan.slos, seed)
        knee.steps.append(summary)
        knee.raw.append(result)
        if on_step is not None:
            on_step(summary)
        return summary.meets

    for repeat in range(plan.repeats):
        passed, failed = _bracket(measure, plan, plan.seed + repeat, stop_below)
        knee.repeats.append((passed, failed))
        if stop_below is not None and failed <= stop_below:
            knee.pruned = True
            break
    passes = [p for p, _ in knee.repeats]
    knee.estimate = statistics.median(passes)
    knee.lower, knee.upper = min(passes), max(f for _, f in knee.repeats)
    knee.reached_max = any(f > plan.max_qps for _, f in knee.repeats)
    return knee


def _bracket(
    measure: Callable[[float, int], bool], plan: SearchPlan, seed: int, stop_below: float | None
) -> tuple[float, float]:
    """(last passing rate, first failing rate) for one seed; the failure is above max_qps if none."""
    passed, rate, steps = 0.0, plan.start_qps, 0
    while rate <= plan.max_qps and steps < MAX_STEPS_PER_REPEAT:
        steps += 1
        if not measure(rate, seed):
            break
        passed, rate = rate, rate * 2
    else:
        return passed, rate
    failed = rate
    if stop_below is not None and failed <= stop_below:
        return passed, failed
    while failed - passed > plan.resolution * failed and steps < MAX_STEPS_PER_REPEAT:
        steps += 1
        middle = (passed + failed) / 2
        if measure(middle, seed):
            passed = middle
        else:
            failed = middle
    return passed, failed


def curve(steps: Sequence[StepSummary]) -> list[StepSummary]:
    """The steps ordered by offered rate (then seed): the QPS-latency curve."""
    return sorted(steps, key=lambda s: (s.offered, s.seed))
