"""The knee: the highest offered rate whose tail latency meets every SLO, with a confidence interval.

Each repeat (its own seed) doubles the rate from `start_qps` while each step's point estimates meet the
SLOs, then bisects between the last such pass and the first miss with *powered* steps (extended until
their quantile interval excludes the bound, or `max_step_s`; capacity/powered.py) until the bracket is
narrower than `resolution` of its top. Each part of a step lasts `duration_s`, or long enough for
`min_requests` requests. The rates bounding the bracket are then measured powered if they
were not decided yet.

The interval is the test-inversion interval: [highest rate whose step was decided a pass, lowest rate
whose step was decided a miss]. Each decision is one-sided at (1 + confidence) / 2; where the tail
latency rises with the rate, the interval misses the knee only if one of its two end steps was decided
wrongly. The estimate interpolates, in log latency, where the point estimates cross the bound.

The search stops, and says so, when a step cannot be a result: `client_bound` (the client could not
drive a step even when measured again; only what it could drive is known), `engine_failed` (most
requests failed), or `not_reached` (the first step already misses, or no step up to `max_qps` does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from servescope.core.errors import ServescopeError
from servescope.kit.capacity.powered import Progress, StepMeasurer
from servescope.kit.capacity.steps import Slo, StepSummary
from servescope.kit.load.records import StepResult, StepRunner

KneeStatus = Literal["measured", "client_bound", "not_reached", "engine_failed"]
MAX_STEPS_PER_REPEAT = 16
SHEDDING = ("http_429", "http_503")  # an engine refusing load it cannot take: a miss, not a failure
CONFIRM_SEED = 500
CONFIRM_STEPS = (
    0.0,
    0.1,
    0.2,
    0.35,
)  # how far from the bracket each try to decide an end of the interval lies


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """How to search: SLOs, step length and its cap, repeats, the bisection's resolution."""

    slos: tuple[Slo, ...]
    duration_s: float = 30.0
    repeats: int = 1
    start_qps: float = 1.0
    max_qps: float = 1024.0
    resolution: float = 0.05  # stop bisecting once the bracket is narrower than this share of its top
    seed: int = 0  # of the first repeat; repeat r runs with seed + r
    max_parts: int = 4  # a powered step is measured in at most this many parts
    confidence: float = 0.95
    probe_qps: float | None = None  # one more powered step at this rate per repeat, for `compare`
    # Without probe_qps: probe at this share of the knee just measured (a baseline: the weekly job uses
    # 1 - the regression drop), recorded as the run's probe rate.
    probe_share: float | None = None
    # Each part of a powered step lasts long enough for this many requests (at least duration_s): near
    # capacity slow requests come in long clusters, and a part much shorter than one misses them.
    min_requests: int = 1000

    def __post_init__(self) -> None:
        if not self.slos:
            raise ValueError("a capacity search needs at least one SLO")
        if self.repeats < 1 or not 0 < self.start_qps <= self.max_qps or not 0 < self.resolution < 1:
            raise ValueError(
                f"repeats must be >= 1, 0 < start_qps <= max_qps and 0 < resolution < 1, got {self}"
            )
        if not 0.5 <= self.confidence < 1 or self.duration_s <= 0 or self.max_parts < 1:
            raise ValueError(f"confidence must be in [0.5, 1), duration_s > 0 and max_parts >= 1, got {self}")


@dataclass(slots=True)
class Knee:
    """The knee with its interval, the steps that found it, and the raw steps kept for comparison."""

    status: KneeStatus
    estimate: float | None
    lower: float  # the interval's lower end: the highest decided pass (0: none)
    upper: float  # its upper end: the lowest decided miss (inf: none)
    repeats: list[tuple[float, float]]  # each repeat's (last passing, first missing rate)
    steps: list[StepSummary] = field(default_factory=list)
    raw: list[StepResult] = field(default_factory=list)
    pruned: bool = False
    reached_max: bool = False
    message: str = ""  # the status line
    client_bound_above: float | None = None  # the highest rate the client drove validly
    pruned_by: str | None = None  # the step that pruned the search
    probe_qps: float | None = None  # the rate probed for `compare`, when one was


class _SearchStoppedError(ServescopeError):
    reason = "search_stopped"

    def __init__(self, status: KneeStatus, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def find_knee(
    runner: StepRunner,
    plan: SearchPlan,
    *,
    stop_below: float | None = None,
    on_step: Callable[[StepSummary], None] | None = None,
    progress: Progress | None = None,
    fallback: StepRunner | None = None,
) -> Knee:
    """Search the knee of `runner` under `plan`; see the module docstring."""
    # One piece: the phases (bracket per repeat, decided ends, probe) share the measure closure and the knee.
    measurer = StepMeasurer(
        runner,
        plan.slos,
        plan.duration_s,
        plan.max_parts,
        plan.confidence,
        min_requests=plan.min_requests,
        fallback=fallback,
        progress=progress,
    )
    knee = Knee("measured", None, 0.0, math.inf, [])

    def measure(rate: float, seed: int, powered: bool, min_parts: int = 1) -> StepSummary:
        summary, result = measurer.step(rate, seed, powered=powered, min_parts=min_parts)
        knee.steps.append(summary)
        knee.raw.append(result)
        if on_step is not None:
            on_step(summary)
        _stop_on(summary, result, knee)
        return summary

    try:
        for repeat in range(plan.repeats):
            passed, failed = _bracket(measure, plan, plan.seed + repeat, stop_below, knee)
            knee.repeats.append((passed, failed))
            if knee.pruned:
                break
        if not knee.pruned:
            _confirm_ends(measure, knee, plan)
            knee.probe_qps = plan.probe_qps
            if knee.probe_qps is None and plan.probe_share is not None:
                _conclude(knee, plan)
                knee.probe_qps = round(plan.probe_share * (knee.estimate or 0.0), 3) or None
            for repeat in range(plan.repeats if knee.probe_qps else 0):
                # Always in max_parts parts: `compare` tests the parts' quantiles against each other.
                measure(knee.probe_qps or 0.0, plan.seed + repeat, True, plan.max_parts)
    except _SearchStoppedError as stop:
        knee.status, knee.message = stop.status, stop.message
    knee.message = "" if knee.status == "measured" else knee.message
    _conclude(knee, plan)
    return knee


def _stop_on(summary: StepSummary, result: StepResult, knee: Knee) -> None:
    if summary.verdict == "client_bound":
        # What the client drove below the rate it could not: the knee lies above it, or is unknown.
        driven = [s.offered for s in knee.steps if s.status == "valid" and s.offered < summary.offered]
        knee.client_bound_above = max(driven, default=0.0)
        raise _SearchStoppedError(
            "client_bound",
            f"client_bound above {knee.client_bound_above:g} req/s: at {summary.offered:g} req/s "
            f"{summary.reason}",
        )
    if summary.verdict == "engine_failed":
        errors = {r.error for r in result.records if r.error}
        passed = any(s.verdict == "pass" or s.meets for s in knee.steps)
        if passed and errors <= set(SHEDDING):
            summary.verdict, summary.meets = "miss", False  # load shed: above capacity
            return
        raise _SearchStoppedError(
            "engine_failed", f"engine_failed at {summary.offered:g} req/s: {summary.reason}"
        )


def _bracket(
    measure: Callable[[float, int, bool], StepSummary],
    plan: SearchPlan,
    seed: int,
    stop_below: float | None,
    knee: Knee,
) -> tuple[float, float]:
    """(last passing, first missing rate) for one seed, by point estimates; powered while bisecting."""
    # One piece: the doubling and the bisection share their bracket and their budget of steps.
    passed, rate, steps = 0.0, plan.start_qps, 0
    while rate <= plan.max_qps and steps < MAX_STEPS_PER_REPEAT:
        steps += 1
        step = measure(rate, seed, False)
        if steps == 1 and not step.meets and step.verdict == "undecided":
            step = measure(rate, seed, True)  # a first step that seems to miss stops the search: be sure
        if not step.meets:
            break
        passed, rate = rate, rate * 2
    else:
        knee.reached_max = True
        raise _SearchStoppedError(
            "not_reached",
            f"not_reached: every step up to {passed:g} req/s met {_slos(plan)}; the knee lies above "
            f"{passed:g} req/s (raise --max-qps)",
        )
    failed = rate
    if passed == 0:
        raise _SearchStoppedError(
            "not_reached",
            f"not_reached: the first step ({rate:g} req/s) already misses {_slos(plan)} "
            f"({_figures(step)}); the knee lies below it (lower --start-qps)",
        )
    if stop_below is not None and failed <= stop_below:
        knee.pruned, knee.pruned_by = True, f"{failed:g} req/s: {_figures(step)}"
        return passed, failed
    while failed - passed > plan.resolution * failed and steps < MAX_STEPS_PER_REPEAT:
        steps += 1
        middle = (passed + failed) / 2
        step = measure(middle, seed, True)
        if step.meets:
            passed = middle
        else:
            failed = middle
            if stop_below is not None and failed <= stop_below:
                knee.pruned, knee.pruned_by = True, f"{failed:g} req/s: {_figures(step)}"
                break
    return passed, failed


def _confirm_ends(measure: Callable[[float, int, bool], StepSummary], knee: Knee, plan: SearchPlan) -> None:
    """Measure (powered) the rates bounding the bracket where no step decided them yet."""
    top_pass = max(p for p, _ in knee.repeats)
    bottom_miss = min(f for _, f in knee.repeats)
    for rate, verdict, widen in ((top_pass, "pass", -1), (bottom_miss, "miss", 1)):
        for attempt, away in enumerate(CONFIRM_STEPS):
            decided = [s.offered for s in knee.steps if s.verdict == verdict]
            at = rate * (1 + widen * away)
            if any(d >= at if verdict == "pass" else d <= at for d in decided) or at <= 0:
                break
            measure(at, plan.seed + CONFIRM_SEED + attempt, True)


def _slos(plan: SearchPlan) -> str:
    return " and ".join(slo.label for slo in plan.slos)


def _figures(step: StepSummary) -> str:
    if step.status == "overloaded":
        return f"overloaded: {step.reason}"
    return ", ".join(f"{key} {step.percentiles[key]:.3g} s" for key in step.limits)


def crossing(steps: Sequence[StepSummary]) -> float | None:
    """Where the tail crosses the bound: the weighted least-squares line of log(quantile / bound) against
    the rate, over the steps near the bound (quantile within a factor 3 of it), each weighted by its
    requests, solved for zero. Near capacity one window's quantile scatters widely (a rare long busy
    period sets a long-run tail), so every step near the knee informs the estimate, not the two that
    happen to bracket it. None with fewer than two such rates or a line that does not rise."""
    near = [
        (s.offered, math.log(s.worst_ratio), s.requests)
        for s in steps
        if s.status == "valid" and math.isfinite(s.worst_ratio) and 1 / 3 < s.worst_ratio < 3
    ]
    if len({rate for rate, _, _ in near}) < 2:
        return None
    total = sum(w for _, _, w in near)
    mean_x = sum(x * w for x, _, w in near) / total
    mean_y = sum(y * w for _, y, w in near) / total
    spread = sum(w * (x - mean_x) ** 2 for x, _, w in near)
    slope = sum(w * (x - mean_x) * (y - mean_y) for x, y, w in near) / spread
    if slope <= 0:
        return None
    return mean_x - mean_y / slope


def _conclude(knee: Knee, plan: SearchPlan) -> None:
    """The interval from the decided steps, the estimate, and the status line."""
    passes = [s.offered for s in knee.steps if s.verdict == "pass"]
    misses = [s.offered for s in knee.steps if s.verdict == "miss"]
    knee.lower, knee.upper = max(passes, default=0.0), min(misses, default=math.inf)
    if knee.lower > knee.upper:  # a decided pass above a decided miss: noise, or a curve that is not monotone
        knee.lower, knee.upper = knee.upper, knee.lower
        knee.message = knee.message or "the decided steps disagree: the interval spans both"
    if knee.status != "measured":
        return
    found = crossing(knee.steps)
    # Without a line to solve: the middle of the repeats' last pass and first miss (point estimates).
    middles = sorted((passed + failed) / 2 for passed, failed in knee.repeats)
    estimate = found if found is not None else middles[len(middles) // 2] if middles else knee.lower
    knee.estimate = min(max(estimate, knee.lower), knee.upper)
    upper = "inf" if math.isinf(knee.upper) else f"{knee.upper:.2f}"
    prefix = "pruned" if knee.pruned else "measured"
    knee.message = (
        f"{prefix}: knee {knee.estimate:.2f} req/s, {plan.confidence:.0%} interval "
        f"[{knee.lower:.2f}, {upper}]" + (f" ({knee.message})" if knee.message else "")
    )


def curve(steps: Sequence[StepSummary]) -> list[StepSummary]:
    """The steps ordered by offered rate (then seed): the QPS-latency curve."""
    return sorted(steps, key=lambda s: (s.offered, s.seed))
