"""Percentiles, the engine-histogram quantile, and the rules that judge a load step, naming the side at
fault: the engine failed (most requests failed), the engine is overloaded (its queue grew: the rate is
above capacity), or the client could not drive the step (it fell behind its schedule)."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from servescope.kit.load.records import (
    ClientCost,
    EngineSample,
    Fault,
    LoopMode,
    RequestRecord,
    StepResult,
    Throughput,
    achieved_rate,
)

Method = Literal["linear", "nearest-rank"]
MIN_ACHIEVED_FRACTION = 0.98
# A step whose backlog grows is above capacity: the engine's waiting queue's trend over the step grows
# by more than the floor and this share of the step's requests (a queue at 112 % of capacity grows by
# 11 % of the arrivals; one below the knee never trends that far), or the TTFT from the send by more
# than this many times its level at the step's start.
BACKLOG_SHARE = 0.05
BACKLOG_GROWTH = 2.0
BACKLOG_WAITING_FLOOR = 5.0
BACKLOG_LATENCY_FLOOR_S = 0.05
MIN_RECORDS_FOR_TREND = 20
# Past this share of the client's own measured ceiling the client, not the engine, shapes the numbers.
CEILING_FRACTION = 0.7
# Errors the client caused itself (a request it never sent), against those the engine or its path did.
CLIENT_ERRORS = frozenset({"not_sent", "cancelled"})
BUSY_CLIENT = 0.8  # share of a core above which the client itself is the bottleneck
BUSY_MACHINE_PRESSURE = 25.0  # PSI avg10 percent above which the client waited for a CPU


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
    """When a step stops being a measurement of the engine at its offered rate."""

    max_lag_p99_s: float = 0.05
    min_achieved_fraction: float = MIN_ACHIEVED_FRACTION
    check_backlog: bool = True
    client_ceiling: float = 0.0  # req/s the client reached against the mock; 0: not checked
    max_failed_share: float = 0.5  # above it the step is engine_failed
    max_unfinished_share: float = 0.01  # requests that never finished (timeouts): above it, overloaded


@dataclass(frozen=True, slots=True)
class EngineView:
    """What a runner read of the engine's /metrics over a step (empty when it read nothing)."""

    samples: tuple[EngineSample, ...] = ()
    ttft_buckets: tuple[tuple[float, float], ...] = ()
    ttft_mean_s: float | None = None


def scheduled_in_window(records: Sequence[RequestRecord], duration_s: float) -> float:
    """The schedule's own rate over the window (a Poisson draw is not exactly the nominal rate)."""
    due = sum(1 for r in records if r.scheduled_s <= duration_s)
    return due / duration_s if duration_s > 0 else 0.0


def engine_failure(records: Sequence[RequestRecord], rules: ValidityRules) -> str | None:
    """Most requests failed at the engine (or on the path to it): no latency of this step means much."""
    failed = Counter(r.error for r in records if r.error and r.error not in CLIENT_ERRORS | {"timeout"})
    if not records or sum(failed.values()) <= rules.max_failed_share * len(records):
        return None
    kinds = ", ".join(f"{reason} x{count}" for reason, count in failed.most_common(3))
    return f"{sum(failed.values())} of {len(records)} requests failed ({kinds}): the engine failed the step"


def _slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of y over x; 0 for fewer than 3 points or no spread."""
    if len(points) < 3:
        return 0.0
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


def unanswered_reason(records: Sequence[RequestRecord], rules: ValidityRules = ValidityRules()) -> str | None:
    """Requests never answered (timeouts) past the rules' share, or None. The client's view: a client
    starved of CPU reads its answers late too, so it counts against the engine only once the client is
    known to have kept its schedule."""
    unfinished = sum(1 for r in records if r.error == "timeout")
    if records and unfinished > rules.max_unfinished_share * len(records):
        return f"backlog: {unfinished} of {len(records)} requests were never answered (timeout)"
    return None


def queue_growth(records: Sequence[RequestRecord], samples: Sequence[EngineSample]) -> str | None:
    """A backlog the engine's own figures show: its waiting queue's trend over the step (`samples`,
    taken while the schedule ran) growing by more than BACKLOG_WAITING_FLOOR and BACKLOG_SHARE of the
    step's requests. A trend, not two quarters: near the knee the queue fluctuates by several requests
    between quarters without any growth."""
    if len(samples) >= 4:
        ordered = sorted(samples, key=lambda s: s.at_s)
        growth = _slope([(s.at_s, s.waiting) for s in ordered]) * (ordered[-1].at_s - ordered[0].at_s)
        if growth > max(BACKLOG_WAITING_FLOOR, BACKLOG_SHARE * len(records)):
            return f"backlog: the engine's waiting queue grew by {growth:.0f} over the step"
    return None


def service_backlog(records: Sequence[RequestRecord]) -> str | None:
    """Without the engine's queue: the trend of the time to first token from the *send* over the step.
    A client that falls behind its schedule does not move it, but one short of CPU reads its answers
    late and does, so this is asked only of a client that kept its schedule."""
    done = sorted((r for r in records if r.service_ttft_s is not None), key=lambda r: r.scheduled_s)
    if len(done) < MIN_RECORDS_FOR_TREND:
        return None
    points = [(r.scheduled_s, r.service_ttft_s or 0.0) for r in done]
    slope = _slope(points)
    growth = slope * (points[-1][0] - points[0][0])
    mean_x, mean_y = statistics.fmean(x for x, _ in points), statistics.fmean(y for _, y in points)
    start = max(0.0, mean_y - slope * (mean_x - points[0][0]))  # the trend's value at the first request
    if growth > max(BACKLOG_LATENCY_FLOOR_S, BACKLOG_GROWTH * start):
        return (
            f"backlog: TTFT from the send grew by {growth * 1000:.0f} ms over the step from "
            f"{start * 1000:.0f} ms (no engine queue samples)"
        )
    return None


def ceiling_reason(records: Sequence[RequestRecord], duration_s: float, ceiling: float) -> str | None:
    """Why a step (open or closed loop) measured the client rather than the engine, or None."""
    achieved = achieved_rate(records, duration_s)
    if ceiling > 0 and achieved > CEILING_FRACTION * ceiling:
        return (
            f"achieved {achieved:.1f} req/s is above {CEILING_FRACTION:.0%} of the client's own ceiling "
            f"({ceiling:.1f} req/s against the mock server)"
        )
    return None


def client_reason(
    records: Sequence[RequestRecord], offered: float, duration_s: float, rules: ValidityRules
) -> str | None:
    """Every way the client failed to drive an open-loop step, joined; None when it drove it."""
    reasons: list[str] = []
    achieved = achieved_rate(records, duration_s)
    due = scheduled_in_window(records, duration_s) or offered
    if achieved < rules.min_achieved_fraction * due:
        reasons.append(
            f"achieved {achieved:.2f} req/s is below {rules.min_achieved_fraction:.0%} of the "
            f"{due:.2f} req/s scheduled (nominal {offered:g})"
        )
    lag = percentile(schedule_lags(records), 0.99) or 0.0
    if lag > rules.max_lag_p99_s:
        reasons.append(
            f"scheduling lag p99 {lag * 1000:.1f} ms exceeds the bound {rules.max_lag_p99_s * 1000:.1f} ms"
        )
    unsent = sum(1 for r in records if r.error in CLIENT_ERRORS)
    if unsent:
        reasons.append(f"{unsent} requests were never sent (the in-flight cap)")
    return "; ".join(reasons) or None


def remedy(client: ClientCost | None) -> str:
    """What to do about a client that could not drive a step, from what it cost."""
    if client is not None and client.busy > BUSY_CLIENT:
        return (
            f"the client used {client.busy:.0%} of a core ({client.cpu_per_request_ms:.1f} ms CPU per "
            "request): scale out with Locust workers (--locust-workers) or a faster client machine"
        )
    if client is not None and client.cpu_pressure > BUSY_MACHINE_PRESSURE:
        return (
            f"the machine was busy (CPU pressure {client.cpu_pressure:.0f} %): the client waited for a CPU; "
            "run it where cores are free"
        )
    return "run the client where cores are free, or scale out with Locust workers (--locust-workers)"


def judge(
    mode: LoopMode,
    records: Sequence[RequestRecord],
    offered: float,
    duration_s: float,
    rules: ValidityRules,
    *,
    samples: Sequence[EngineSample] = (),
    client: ClientCost | None = None,
) -> tuple[Fault | None, str | None]:
    """The side at fault and why, or (None, None) for a step that stands as a measurement.

    The engine first: a step where most requests failed, or whose backlog the engine's own figures show
    growing, is the engine's whatever the client did (a client that fell behind sent less, not more).
    Then the client. Then the client's view of the backlog, asked only of a client that kept its
    schedule: requests never answered, and where the engine's queue was not sampled, TTFT's trend.
    """
    failure = engine_failure(records, rules)
    if failure is not None:
        return "engine", failure
    backlog = mode == "open" and rules.check_backlog
    if backlog:
        # The queue while the schedule ran: after it the engine drains what is left, whatever the load.
        window = [sample for sample in samples if 0 <= sample.at_s <= duration_s]
        grown = queue_growth(records, window)
        if grown is not None:
            return "overload", grown
    behind = ceiling_reason(records, duration_s, rules.client_ceiling)
    if behind is None and mode == "open":
        behind = client_reason(records, offered, duration_s, rules)
    if behind is not None:
        return "client", f"the client could not drive the step: {behind}; remedy: {remedy(client)}"
    grown = unanswered_reason(records, rules) if backlog else None
    if grown is None and backlog and len(samples) < 4:
        grown = service_backlog(records)
    return ("overload", grown) if grown is not None else (None, None)


def client_step(
    mode: LoopMode,
    offered: float,
    duration_s: float,
    records: Iterable[RequestRecord],
    rules: ValidityRules,
    *,
    engine: EngineView = EngineView(),
    notes: Sequence[str] = (),
    throughput: Throughput | None = None,
    client: ClientCost | None = None,
    warmup_s: float = 0.0,
) -> StepResult:
    """A step measured by a load client, judged: records in schedule order, the schedule lag's p99,
    and the side at fault with its reason when it cannot stand."""
    ordered = tuple(sorted(records, key=lambda record: record.scheduled_s))
    fault, reason = judge(mode, ordered, offered, duration_s, rules, samples=engine.samples, client=client)
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
        fault=fault,
        throughput=throughput,
        client=client,
        warmup_s=warmup_s,
    )
