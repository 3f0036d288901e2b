"""Percentiles, the engine-histogram quantile, and the rules that make a load step invalid."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from servescope.kit.load.records import EngineSample, LoopMode, RequestRecord, StepResult, achieved_rate

Method = Literal["linear", "nearest-rank"]
MIN_ACHIEVED_FRACTION = 0.98
# A step whose backlog grows is above capacity: waiting (or latency) in its last quarter this many times
# the first quarter's, and by more than the floor, so jitter on an idle engine does not count.
BACKLOG_GROWTH = 2.0
BACKLOG_WAITING_FLOOR = 2.0
BACKLOG_LATENCY_FLOOR_S = 0.05
MIN_RECORDS_FOR_TREND = 20
# Past this share of the client's own measured ceiling the client, not the engine, shapes the numbers.
CEILING_FRACTION = 0.7


def percentile(values: Sequence[float], q: float, *, method: Method = "linear") -> float | None:
    """The q-quantile (0..1) of `values`, by `method`; None when empty.

    linear interpolates between order statistics: the load reports' figures over finite times.
    nearest-rank is always a value some element has: over latencies where a request that never finished
    is infinite, interpolating beside it gives inf or NaN even where the rank falls on a finite one.
    """
    if not 0 <= q <= 1:
        raise ValueError(f"quantile {q} is outside 0..1")
    if not values:
        return None
    ordered = sorted(values)
    if method == "nearest-rank":
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def bucket_bounds(buckets: Sequence[tuple[float, float]], q: float) -> tuple[float, float] | None:
    """The bucket (lower, upper bound) holding the q-quantile of cumulative `(le, count)` buckets."""
    ordered = sorted(buckets)
    if not ordered or ordered[-1][1] <= 0:
        return None
    rank = q * ordered[-1][1]
    lower = 0.0
    for upper, count in ordered:
        if count >= rank:
            return lower, upper
        lower = upper
    return lower, math.inf


def schedule_lags(records: Sequence[RequestRecord]) -> list[float]:
    """How late each send went out against its schedule (0 when on time)."""
    return [max(0.0, r.sent_s - r.scheduled_s) for r in records if r.sent_s is not None]


@dataclass(frozen=True)
class ValidityRules:
    """When an open-loop step stops being a measurement of the engine."""

    max_lag_p99_s: float = 0.05
    min_achieved_fraction: float = MIN_ACHIEVED_FRACTION
    check_backlog: bool = True
    client_ceiling: float = 0.0  # req/s the client reached against the mock; 0: not checked


def scheduled_in_window(records: Sequence[RequestRecord], duration_s: float) -> float:
    """The schedule's own rate over the window (a Poisson draw is not exactly the nominal rate)."""
    due = sum(1 for r in records if r.scheduled_s <= duration_s)
    return due / duration_s if duration_s > 0 else 0.0


def invalid_reason(
    records: Sequence[RequestRecord],
    offered: float,
    duration_s: float,
    samples: Sequence[EngineSample],
    rules: ValidityRules,
) -> str | None:
    """Every reason an open-loop step cannot stand as a result, joined; None when it can."""
    reasons: list[str] = []
    achieved = achieved_rate(records, duration_s)
    due = scheduled_in_window(records, duration_s) or offered
    if achieved < rules.min_achieved_fraction * due:
        reasons.append(
            f"achieved {achieved:.2f} req/s is below {rules.min_achieved_fraction:.0%} of the "
            f"{due:.2f} req/s scheduled (nominal {offered:g}): the client could not keep the schedule"
        )
    lag = percentile(schedule_lags(records), 0.99) or 0.0
    if lag > rules.max_lag_p99_s:
        reasons.append(
            f"scheduling lag p99 {lag * 1000:.1f} ms exceeds the bound {rules.max_lag_p99_s * 1000:.1f} ms"
        )
    backlog = backlog_reason(records, samples) if rules.check_backlog else None
    if backlog is not None:
        reasons.append(backlog)
    return "; ".join(reasons) or None


def ceiling_reason(records: Sequence[RequestRecord], duration_s: float, ceiling: float) -> str | None:
    """Why a step (open or closed loop) measured the client rather than the engine, or None."""
    achieved = achieved_rate(records, duration_s)
    if ceiling > 0 and achieved > CEILING_FRACTION * ceiling:
        return (
            f"achieved {achieved:.1f} req/s is above {CEILING_FRACTION:.0%} of the client's own ceiling "
            f"({ceiling:.1f} req/s against the mock server): scale out with `servescope load locust`"
        )
    return None


def _quarters(values: Sequence[float]) -> tuple[float, float]:
    quarter = max(1, len(values) // 4)
    return statistics.median(values[:quarter]), statistics.median(values[-quarter:])


def backlog_reason(records: Sequence[RequestRecord], samples: Sequence[EngineSample]) -> str | None:
    """A backlog that grows over the step (the engine's waiting queue, else the client's latency)."""
    if len(samples) >= 4:
        first, last = _quarters([s.waiting for s in sorted(samples, key=lambda s: s.at_s)])
        if last > max(BACKLOG_GROWTH * first, first + BACKLOG_WAITING_FLOOR):
            return f"backlog: the engine's waiting queue grew from {first:.1f} to {last:.1f} over the step"
    done = sorted((r for r in records if r.ttft_s is not None), key=lambda r: r.scheduled_s)
    if len(done) >= MIN_RECORDS_FOR_TREND:
        first, last = _quarters([r.ttft_s or 0.0 for r in done])
        if last > max(BACKLOG_GROWTH * first, first + BACKLOG_LATENCY_FLOOR_S):
            return f"backlog: TTFT grew from {first * 1000:.0f} ms to {last * 1000:.0f} ms over the step"
    return None


@dataclass(frozen=True, slots=True)
class EngineView:
    """What a runner read of the engine's /metrics over a step (empty when it read nothing)."""

    samples: tuple[EngineSample, ...] = ()
    ttft_buckets: tuple[tuple[float, float], ...] = ()
    ttft_mean_s: float | None = None


def client_step(
    mode: LoopMode,
    offered: float,
    duration_s: float,
    records: Iterable[RequestRecord],
    rules: ValidityRules,
    *,
    engine: EngineView = EngineView(),
    notes: Sequence[str] = (),
) -> StepResult:
    """A step measured by a load client, judged: records in schedule order, the schedule lag's p99,
    and why it cannot stand (the client's ceiling, then in open loop the other rules), if it cannot."""
    ordered = tuple(sorted(records, key=lambda record: record.scheduled_s))
    reason = ceiling_reason(ordered, duration_s, rules.client_ceiling)
    if reason is None and mode == "open":
        reason = invalid_reason(ordered, offered, duration_s, engine.samples, rules)
    return StepResult(
        mode,
        offered,
        duration_s,
        ordered,
        schedule_lag_p99_s=percentile(schedule_lags(ordered), 0.99) or 0.0,
        engine_samples=engine.samples,
        engine_ttft_buckets=engine.ttft_buckets,
        engine_ttft_mean_s=engine.ttft_mean_s,
        invalid_reason=reason,
        notes=tuple(notes),
    )
