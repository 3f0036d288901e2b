"""One load step judged: latency percentiles against the SLOs, goodput, batch, and the backlog test.

A request that never finished counts as infinitely slow: it violates every SLO. ITL is read as the
request's mean time per output token (the records carry no per-token times), so `itl` and `tpot` agree.

Backlog (an open-loop rate above capacity): the engine's waiting queue grows over the step (its
least-squares slope x duration exceeds max(5, 5 % of the requests)), or the latency of the second half
of the step exceeds 1.5x the first half's median plus 50 ms, or over 1 % of the requests never finished.
A backlogged step is never a knee, whatever its percentiles say.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from servescope.kit.load.records import RequestRecord, StepResult
from servescope.kit.load.validity import percentile

Metric = Literal["ttft", "e2e", "itl", "tpot"]
METRICS: tuple[Metric, ...] = ("ttft", "e2e", "itl", "tpot")


@dataclass(frozen=True, slots=True)
class Slo:
    """`quantile` of `metric` must stay at or below `limit_s`."""

    metric: Metric
    limit_s: float
    quantile: float = 0.99

    @classmethod
    def parse(cls, text: str, quantile: float = 0.99) -> Slo:
        """`ttft:0.5` (metric:seconds); raises ValueError naming the text."""
        name, _, limit = text.partition(":")
        if name not in METRICS:
            raise ValueError(f"SLO {text!r}: metric must be one of {', '.join(METRICS)}")
        try:
            seconds = float(limit)
        except ValueError:
            raise ValueError(f"SLO {text!r}: the limit must be seconds, like ttft:0.5") from None
        if not seconds > 0 or not 0 < quantile < 1:
            raise ValueError(f"SLO {text!r}: the limit must be > 0 and the quantile in (0, 1)")
        return cls(name, seconds, quantile)

    @property
    def label(self) -> str:
        return f"p{self.quantile * 100:g} {self.metric} <= {self.limit_s * 1000:g} ms"


def latency(record: RequestRecord, metric: Metric) -> float:
    """The record's latency in seconds; infinite when it never got there."""
    if not record.ok:
        return math.inf
    value = {"ttft": record.ttft_s, "e2e": record.e2e_s}.get(metric, record.tpot_s)
    if value is None:
        return 0.0 if metric in ("itl", "tpot") else math.inf  # one output token has no inter-token time
    return value


def latency_quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile of latencies (an infinite one never finished); NaN when empty."""
    found = percentile(values, q, method="nearest-rank")
    return math.nan if found is None else found


@dataclass(frozen=True, slots=True)
class StepSummary:
    """What capacity keeps of a step."""

    offered: float
    seed: int
    requests: int
    percentiles: dict[str, float]  # "p99_ttft" etc., seconds
    goodput: float  # requests/s that met every SLO
    throughput_tokens: float  # output tokens/s
    mean_running: float
    backlog: str | None  # why the step looks backlogged, or None
    meets: bool
    invalid: str | None


def summarise(step: StepResult, slos: Sequence[Slo], seed: int) -> StepSummary:
    """Judge `step` against `slos`."""
    records = step.records
    percentiles = {}
    for metric in METRICS:
        values = [latency(r, metric) for r in records]
        for q in {0.5, 0.99, *(s.quantile for s in slos if s.metric == metric)}:
            percentiles[f"p{q * 100:g}_{metric}"] = latency_quantile(values, q)
    good = sum(1 for r in records if all(latency(r, s.metric) <= s.limit_s for s in slos))
    tokens = sum(r.output_tokens for r in records if r.ok)
    running = [s.running for s in step.engine_samples]
    backlog = backlog_reason(step)
    within = all(percentiles[f"p{s.quantile * 100:g}_{s.metric}"] <= s.limit_s for s in slos)
    return StepSummary(
        offered=step.offered,
        seed=seed,
        requests=len(records),
        percentiles=percentiles,
        goodput=good / step.duration_s,
        throughput_tokens=tokens / step.duration_s,
        mean_running=sum(running) / len(running) if running else math.nan,
        backlog=backlog,
        meets=within and backlog is None and step.valid and bool(records),
        invalid=step.invalid_reason,
    )


def backlog_reason(step: StepResult) -> str | None:
    """Why the step is not stationary (see the module docstring), or None."""
    records = step.records
    unfinished = sum(1 for r in records if r.done_s is None)
    if records and unfinished > 0.01 * len(records):
        return f"{unfinished} of {len(records)} requests never finished"
    growth = _slope([(s.at_s, s.waiting) for s in step.engine_samples]) * step.duration_s
    if growth > max(5.0, 0.05 * len(records)):
        return f"the waiting queue grew by {growth:.0f} over the step"
    half = step.duration_s / 2
    first = [latency(r, "ttft") for r in records if r.scheduled_s < half]
    second = [latency(r, "ttft") for r in records if r.scheduled_s >= half]
    if first and second:
        early, late = latency_quantile(first, 0.5), latency_quantile(second, 0.5)
        if late > 1.5 * early + 0.05:
            return f"median TTFT rose from {early * 1000:.0f} ms to {late * 1000:.0f} ms within the step"
    return None


def _slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of y over x; 0 for fewer than 3 points."""
    if len(points) < 3:
        return 0.0
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
