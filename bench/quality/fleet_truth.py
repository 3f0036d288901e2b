"""The incidents of a fleet scenario, resolved against its ground truth.

The SLO incidents are the SLOs' own definitions applied to the truth (the requests as served, the
endpoints as they were): a model's latency budget burning at a paging rate (over 14.4x on average over
both 1 h and 5 min, or 6x over 6 h and 30 min, of the requests' real latencies against the bound, not a
histogram's buckets), its availability budget likewise (the share of its endpoints that should serve and
do not). An alert that fires where the relaxed truth holds (the burn at 0.7 of the factor) is a correct
one, not required: a threshold crossed in the truth a minute later than in the rates is no false page.
The other incidents are windows the scenario states (a node without exporter, the fleet blind).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate

from servescope.bundle.alerts.rules_slo import PAGE
from servescope.core.config import AlertsConfig

from .fleet_model import STEP, Fleet
from .fleet_series import Truth
from .truth import TruthWindow, sustained

Interval = tuple[float, float]
RELAXED = 0.7
Resolver = Callable[[Truth, Fleet, float], list[Interval]]  # truth, fleet, factor scale -> intervals


def _window_sum(values: list[float], steps: int) -> list[float]:
    """Trailing sums over `steps` samples (the sample at each step included)."""
    prefix = [0.0, *accumulate(values)]
    return [prefix[i + 1] - prefix[max(0, i + 1 - steps)] for i in range(len(values))]


def _ratio(over: list[float], total: list[float], window: str) -> list[float | None]:
    steps = int(_seconds(window) // STEP)
    bad, all_ = _window_sum(over, steps), _window_sum(total, steps)
    return [b / a if a > 0 else None for b, a in zip(bad, all_, strict=True)]


def _seconds(window: str) -> float:
    return float(window[:-1]) * {"m": 60, "h": 3600, "d": 86400}[window[-1]]


def _pages(ratio: Callable[[str], list[float | None]], budget: float, scale: float) -> list[bool]:
    flags = None
    for factor, long, short in PAGE:
        bound = factor * budget * scale
        pair = [
            lw is not None and sw is not None and lw > bound and sw > bound
            for lw, sw in zip(ratio(long), ratio(short), strict=True)
        ]
        flags = pair if flags is None else [a or b for a, b in zip(flags, pair, strict=True)]
    return flags or []


def latency_burn(model: str, sli: str) -> Resolver:
    """When `model`'s `sli` ("ttft" or "e2e") budget burns at a paging rate, by the real latencies."""

    def resolve(truth: Truth, fleet: Fleet, scale: float) -> list[Interval]:
        total = truth.requests.get(model, [])
        over = (truth.ttft_over if sli == "ttft" else truth.e2e_over).get(model, [])
        if not total:
            return []
        flags = _pages(lambda w: _ratio(over, total, w), 1 - AlertsConfig().slo_objective, scale)
        return sustained([i * STEP for i in range(len(flags))], flags, 0.0)

    return resolve


def availability_burn(model: str) -> Resolver:
    """When `model`'s share of endpoints that should serve and do not burns its availability budget."""

    def resolve(truth: Truth, fleet: Fleet, scale: float) -> list[Interval]:
        should, down = truth.should_serve.get(model, []), truth.unavailable.get(model, [])
        if not should:
            return []
        share = [d / s if s else 0.0 for d, s in zip(down, should, strict=True)]
        counted = [1.0 if s else 0.0 for s in should]
        budget = 1 - AlertsConfig().availability_objective
        flags = _pages(lambda w: _ratio(share, counted, w), budget, scale)
        return sustained([i * STEP for i in range(len(flags))], flags, 0.0)

    return resolve


def during(start_minute: float, end_minute: float = float("inf")) -> Resolver:
    """A window the scenario states, in minutes."""
    return lambda truth, fleet, scale: [(start_minute * 60, min(end_minute * 60, fleet.duration))]


@dataclass(frozen=True)
class FleetIncident:
    """Something the on-call engineer must hear of: `expect` must fire, `accept` may."""

    name: str
    when: Resolver
    expect: Sequence[str]
    accept: Sequence[str] = ()
    labels: tuple[tuple[str, str], ...] = ()
    grace_s: float = 20 * 60.0
    lead_s: float = 5 * 60.0


def windows(fleet: Fleet, incidents: tuple[FleetIncident, ...], truth: Truth) -> list[TruthWindow]:
    """Each incident once per interval its condition held; its relaxed intervals accept its alerts."""
    found = []
    for incident in incidents:
        expect, accept = tuple(incident.expect), tuple(incident.accept)
        common = {"labels": incident.labels, "grace_s": incident.grace_s, "lead_s": incident.lead_s}
        for start, end in incident.when(truth, fleet, 1.0):
            found.append(TruthWindow(incident.name, start, end, expect, accept, **common))  # type: ignore[arg-type]
        for start, end in incident.when(truth, fleet, RELAXED):
            relaxed = f"{incident.name} (relaxed)"
            found.append(TruthWindow(relaxed, start, end, (), (*expect, *accept), **common))  # type: ignore[arg-type]
    return found
