"""The knee: the highest offered rate whose tail latency meets every SLO, with a confidence interval.

Each repeat (its own seed) doubles the rate from `start_qps` while each step's point estimates meet the SLOs,
then bisects between the last such pass and the first miss with *powered* steps (extended until their quantile
interval excludes the bound, or up to `max_parts`; capacity/powered.py) until the bracket is narrower than
`resolution` of its top. Each part of a step lasts `duration_s`, or long enough for `min_requests` requests.
The rates bounding the bracket are then measured powered if not decided yet.

The interval is the test-inversion interval: [highest rate whose step was decided a pass, lowest rate whose
step was decided a miss]. Each decision is one-sided at (1 + confidence) / 2; where the tail latency rises
with the rate, the interval misses the knee only if one of its two end steps was decided wrongly. The estimate
interpolates, in log latency, where the point estimates cross the bound.

A step the client cannot drive, even when measured again, is neither a pass nor a miss: above a pass, the
bisection goes on below it. The search stops, and says so, when a step cannot be a result: `client_bound` (no
miss below the rates the client could not drive; only what it drove is known), `engine_failed` (most requests
failed), or `not_reached` (the first step already misses, or no step up to `max_qps` does).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from servescope.core.errors import ServescopeError
from servescope.kit.capacity.estimate import crossing
from servescope.kit.capacity.powered import Progress, StepMeasurer
from servescope.kit.capacity.steps import Slo, StepSummary
from servescope.kit.load.records import StepResult, StepRunner

KneeStatus = Literal["measured", "client_bound", "not_reached", "engine_failed"]
MAX_STEPS_PER_REPEAT = 16
SHEDDING = ("http_429", "http_503")  # an engine refusing load it cannot take: a miss, not a failure
CONFIRM_SEED = 500
# How far from the bracket each try to decide an end of the interval lies.
CONFIRM_STEPS = (0.0, 0.1, 0.2, 0.35)


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


class _Measure(Protocol):
    """One step measured and recorded; a step the client could not drive ends the search unless the
    caller can go on below it (`client_bound_ok`)."""

    def __call__(
        self, rate: float, seed: int, powered: bool, min_parts: int = 1, *, client_bound_ok: bool = False
    ) -> StepSummary: ...


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

    def measure(
        rate: float, seed: int, powered: bool, min_parts: int = 1, *, client_bound_ok: bool = False
    ) -> StepSummary:
        summary, result = measurer.step(rate, seed, powered=powered, min_parts=min_parts)
        knee.steps.append(summary)
        knee.raw.append(result)
        if on_step is not None:
            on_step(summary)
        _stop_on(summary, result, knee)
        if summary.verdict == "client_bound" and not client_bound_ok:
            raise _client_bound(summary, knee)
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
                note = knee.message  # the estimate is needed now; its status line comes at the end
                _conclude(knee, plan)
                knee.probe_qps = round(plan.probe_share * (knee.estimate or 0.0), 3) or None
                knee.message = note
            for repeat in range(plan.repeats if knee.probe_qps else 0):
                # Always in max_parts parts: `compare` tests the parts' quantiles against each other.
                measure(knee.probe_qps or 0.0, plan.seed + repeat, True, plan.max_parts)
    except _SearchStoppedError as stop:
        knee.status, knee.message = stop.status, stop.message
    _conclude(knee, plan)
    return knee


def _client_bound(summary: StepSummary, knee: Knee) -> _SearchStoppedError:
    """The search's end at a step the client could not drive, with no miss below it."""
    # What the client drove below the rate it could not: the knee lies above it, or is unknown.
    driven = [s.offered for s in knee.steps if s.status == "valid" and s.offered < summary.offered]
    knee.client_bound_above = max(driven, default=0.0)
    return _SearchStoppedError(
        "client_bound",
        f"client_bound above {knee.client_bound_above:g} req/s: at {summary.offered:g} req/s "
        f"{summary.reason}",
    )


def _stop_on(summary: StepSummary, result: StepResult, knee: Knee) -> None:
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
    measure: _Measure, plan: SearchPlan, seed: int, stop_below: float | None, knee: Knee
) -> tuple[float, float]:
    """(last passing, first missing rate) for one seed: doubled by point estimates, then bisected with
    powered steps. A rate the client cannot drive (above a pass) is neither: the bisection goes on below
    it, where the client may still find the knee; with no miss below it, the search ends `client_bound`."""
    passed, step, steps = _double(measure, plan, seed, knee)
    rate = step.offered
    ceiling = step if step.verdict == "client_bound" else None  # the lowest rate the client could not drive
    failed = None if ceiling is not None else rate  # the lowest miss
    if failed is not None and stop_below is not None and failed <= stop_below:
        knee.pruned, knee.pruned_by = True, f"{failed:g} req/s: {_figures(step)}"
        return passed, failed
    upper = rate
    while upper - passed > plan.resolution * upper and steps < MAX_STEPS_PER_REPEAT:
        steps += 1
        middle = (passed + upper) / 2
        step = measure(middle, seed, True, client_bound_ok=True)
        if step.verdict == "client_bound":
            ceiling = step
        elif step.meets:
            passed = middle
            continue
        else:
            failed = middle
            if stop_below is not None and failed <= stop_below:
                knee.pruned, knee.pruned_by = True, f"{failed:g} req/s: {_figures(step)}"
                break
        upper = middle
    if failed is None:
        assert ceiling is not None  # the doubling stopped at a step the client could not drive
        raise _client_bound(ceiling, knee)
    return passed, failed


def _double(measure: _Measure, plan: SearchPlan, seed: int, knee: Knee) -> tuple[float, StepSummary, int]:
    """The last passing rate, the step that ended the doubling (a miss, or a rate the client could not
    drive above a pass), and the steps taken."""
    passed, rate, steps, slos = 0.0, plan.start_qps, 0, " and ".join(slo.label for slo in plan.slos)
    while rate <= plan.max_qps and steps < MAX_STEPS_PER_REPEAT:
        steps += 1
        step = measure(rate, seed, False, client_bound_ok=passed > 0)
        if step.verdict == "client_bound":
            return passed, step, steps
        if steps == 1 and not step.meets and step.verdict == "undecided":
            step = measure(rate, seed, True)  # a first step that seems to miss stops the search: be sure
        if not step.meets:
            if passed == 0:
                raise _SearchStoppedError(
                    "not_reached",
                    f"not_reached: the first step ({rate:g} req/s) already misses {slos} "
                    f"({_figures(step)}); the knee lies below it (lower --start-qps)",
                )
            return passed, step, steps
        passed, rate = rate, rate * 2
    knee.reached_max = True
    raise _SearchStoppedError(
        "not_reached",
        f"not_reached: every step up to {passed:g} req/s met {slos}; the knee lies above "
        f"{passed:g} req/s (raise --max-qps)",
    )


def _confirm_ends(measure: _Measure, knee: Knee, plan: SearchPlan) -> None:
    """Measure (powered) the rates bounding the bracket where no step decided them yet. A rate the client
    cannot drive leaves its end undecided; the bracket came from steps it drove, so the search stands."""
    top_pass, bottom_miss = max(p for p, _ in knee.repeats), min(f for _, f in knee.repeats)
    for rate, verdict, widen in ((top_pass, "pass", -1), (bottom_miss, "miss", 1)):
        for attempt, away in enumerate(CONFIRM_STEPS):
            decided = [s.offered for s in knee.steps if s.verdict == verdict]
            at = rate * (1 + widen * away)
            if any(d >= at if verdict == "pass" else d <= at for d in decided) or at <= 0:
                break
            step = measure(at, plan.seed + CONFIRM_SEED + attempt, True, client_bound_ok=True)
            if step.verdict == "client_bound":
                knee.message = f"the client could not drive {at:g} req/s, which was to decide a {verdict}"
                break


def _figures(step: StepSummary) -> str:
    if step.status == "overloaded":
        return f"overloaded: {step.reason}"
    return ", ".join(f"{key} {step.percentiles[key]:.3g} s" for key in step.limits)


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
