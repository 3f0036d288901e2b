"""Ground-truth incident windows: a plan's conditions resolved against what the simulation recorded."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .node import Truth, engine_url
from .scenarios import (
    AfterDeath,
    Both,
    Busy,
    Condition,
    During,
    Incident,
    KvAbove,
    LeakToOom,
    Plan,
    SloBreach,
    SloBurn,
)
from .truth_burn import burn_flags

Interval = tuple[float, float]
KV_SMOOTHING_SECONDS = 60.0  # KV usage moves with every admitted request; judge it by the minute


@dataclass(frozen=True)
class TruthWindow:
    """One occurrence of an incident: when it held, and the labels that identify its alerts."""

    incident: str
    start: float
    end: float
    expect: tuple[str, ...]
    accept: tuple[str, ...]
    labels: tuple[tuple[str, str], ...]
    grace_s: float
    ends_in_oom: bool = False  # a leak window that ended when the engine died of OOM
    # An alert over rates may lead the truth by this much: an SLO's rates over 5 minutes, or a histogram
    # read from a lower bucket, cross a threshold before the requests' real latencies do.
    lead_s: float = 0.0


@dataclass(frozen=True)
class Recorded:
    """What the benchmark needs of a run's ground truth: the sampled trace and the engines' deaths."""

    truth: Truth
    died_at: dict[int, float]
    duration: float


def windows(plan: Plan, recorded: Recorded) -> list[TruthWindow]:
    """Every incident of the plan, once per interval in which its condition held."""
    found = []
    for incident in plan.incidents:
        when = incident.when
        oom = isinstance(when, LeakToOom) and when.gpu in recorded.truth.oom_at
        for start, end in resolve(when, recorded):
            found.append(
                TruthWindow(
                    incident.name,
                    start,
                    end,
                    incident.expect,
                    incident.accept,
                    labels_of(incident),
                    incident.grace_s,
                    oom,
                    incident.lead_s,
                )
            )
    return found


def labels_of(incident: Incident) -> tuple[tuple[str, str], ...]:
    labels = []
    if incident.gpu is not None:
        labels.append(("gpu", str(incident.gpu)))
    if incident.engine is not None:
        labels.append(("endpoint", engine_url(incident.engine)))
    return tuple(labels)


def resolve(condition: Condition, recorded: Recorded) -> list[Interval]:
    truth, end = recorded.truth, recorded.duration
    if isinstance(condition, During):
        return [(condition.start, min(condition.end, end))] if condition.start < end else []
    if isinstance(condition, LeakToOom):
        return [(condition.start, truth.oom_at.get(condition.gpu, end))]
    if isinstance(condition, AfterDeath):
        died = recorded.died_at.get(condition.engine)
        return [(died, end)] if died is not None and died < end else []
    if isinstance(condition, Busy):
        flags = [_busy(row, condition.gpu) > condition.threshold for row in truth.gpu_busy]
        return sustained(truth.times, flags, condition.min_s)
    if isinstance(condition, KvAbove):
        kv = smoothed(truth.times, [row[condition.engine] for row in truth.engine_kv], KV_SMOOTHING_SECONDS)
        return sustained(truth.times, [v > condition.threshold for v in kv], condition.min_s)
    if isinstance(condition, SloBreach):
        return slo_breaches(truth, condition)
    if isinstance(condition, SloBurn):
        return sustained(truth.times, burn_flags(truth, condition, _request_deltas), 0.0)
    if isinstance(condition, Both):
        both = intersect(resolve(condition.first, recorded), resolve(condition.second, recorded))
        return [(a, b) for a, b in both if b - a >= condition.min_s]
    raise TypeError(f"unknown condition {condition!r}")


def slo_breaches(truth: Truth, breach: SloBreach) -> list[Interval]:
    """When more than `share` of the requests that finished in the trailing window were over the bound."""
    bounds = truth.bounds.get(breach.sli)
    if not bounds:
        return []
    if breach.bound not in bounds:
        raise ValueError(f"{breach.sli}: {breach.bound} is not a bucket bound of the engines' histogram")
    within = bounds.index(breach.bound) + 1  # buckets up to and including the bound
    totals, overs = _request_deltas(truth.latency[breach.sli], within)
    flags, total, over, first = [], 0, 0, 0
    for i, t in enumerate(truth.times):
        total, over = total + totals[i], over + overs[i]
        while truth.times[first] <= t - breach.window_s:
            total, over = total - totals[first], over - overs[first]
            first += 1
        flags.append(total > 0 and over > breach.share * total)
    return sustained(truth.times, flags, 0.0)


def _request_deltas(rows: list[list[tuple[int, ...] | None]], within: int) -> tuple[list[int], list[int]]:
    """Requests finished, and those over the bound, per sample, summed over the engines."""
    totals, overs = [], []
    previous: list[tuple[int, ...] | None] = [None] * (len(rows[0]) if rows else 0)
    for row in rows:
        total = over = 0
        for engine, counts in enumerate(row):
            if counts is None:
                previous[engine] = None
                continue
            before = previous[engine]
            # A restarted engine starts from zero: count what it has since, as rate() does with a reset.
            if before is None or sum(counts) < sum(before):
                before = (0,) * len(counts)
            new = [now - then for now, then in zip(counts, before, strict=True)]
            total += sum(new)
            over += sum(new[within:])
            previous[engine] = counts
        totals.append(total)
        overs.append(over)
    return totals, overs


def _busy(row: list[float | None], gpu: int | None) -> float:
    if gpu is not None:
        value = row[gpu]
        return -math.inf if value is None else value
    # The fleet's mean over the GPUs that still report, as avg() over their utilisation does.
    present = [v for v in row if v is not None]
    return sum(present) / len(present) if present else -math.inf


def smoothed(times: list[float], values: list[float | None], window: float) -> list[float]:
    """Trailing mean over `window` seconds; a missing value (engine down) counts as 0."""
    out, total, first = [], 0.0, 0
    filled = [0.0 if v is None else v for v in values]
    for i, t in enumerate(times):
        total += filled[i]
        while times[first] <= t - window:
            total -= filled[first]
            first += 1
        out.append(total / (i - first + 1))
    return out


def sustained(times: list[float], flags: list[bool], min_s: float) -> list[Interval]:
    """Intervals [first true sample, first false sample after it) that last at least `min_s`."""
    found: list[Interval] = []
    start: float | None = None
    for t, flag in zip(times, flags, strict=True):
        if flag and start is None:
            start = t
        elif not flag and start is not None:
            found.append((start, t))
            start = None
    if start is not None:
        found.append((start, times[-1]))
    return [(a, b) for a, b in found if b - a >= min_s]


def intersect(first: list[Interval], second: list[Interval]) -> list[Interval]:
    found = []
    for a0, a1 in first:
        for b0, b1 in second:
            lo, hi = max(a0, b0), min(a1, b1)
            if lo < hi:
                found.append((lo, hi))
    return sorted(found)
