"""One load step judged: latency quantiles against the SLOs with their confidence intervals, goodput.

A request that never finished counts as infinitely slow: it violates every SLO. `ttft` and `e2e` are
per request from the scheduled send; `tpot` is a request's mean time per output token; `itl` is the gap
between consecutive streamed chunks, each gap one observation (a request's worst gap where one value per
request is needed: goodput, `compare`). Without per-chunk times (the simulated engine) `itl` is TPOT.

The verdict: a step the load runner judged `overloaded` is a miss (its latency grows with its length, it
is above capacity), `client_bound` and `engine_failed` are what they say, and a valid step is `pass`
when every SLO's quantile interval lies at or below its bound, `miss` when one lies above, and
`undecided` otherwise (more requests are needed: the search extends it). `meets` is the point estimate's
answer, which steers the search; only decided steps bound the knee's interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from servescope.kit.capacity.quantiles import quantile_interval
from servescope.kit.load.records import RequestRecord, StepResult, StepStatus, delivered
from servescope.kit.load.validity import percentile

Metric = Literal["ttft", "e2e", "itl", "tpot"]
METRICS: tuple[Metric, ...] = ("ttft", "e2e", "itl", "tpot")
Verdict = Literal["pass", "miss", "undecided", "client_bound", "engine_failed"]


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

    @property
    def key(self) -> str:
        return f"p{self.quantile * 100:g}_{self.metric}"


def latency(record: RequestRecord, metric: Metric) -> float:
    """The record's latency in seconds, one value per request; infinite when it never got there."""
    if not record.ok:
        return math.inf
    # One property read per call (each is computed): a search reads hundreds of thousands.
    if metric == "ttft":
        value = record.ttft_s
    elif metric == "e2e":
        value = record.e2e_s
    elif metric == "itl" and record.chunk_gaps:
        return max(record.chunk_gaps)
    else:
        value = record.tpot_s
    if value is None:
        return 0.0 if metric in ("itl", "tpot") else math.inf  # one output token has no inter-token time
    return value


def observations(records: Sequence[RequestRecord], metric: Metric) -> list[float]:
    """What the step's quantile of `metric` is taken over, in the order the requests were due: one value
    per request, or for `itl` one per chunk gap (a failed request is one infinite value)."""
    if metric != "itl" or not any(r.chunk_gaps for r in records):
        return [latency(r, metric) for r in records]
    return [gap for r in records for gap in (r.chunk_gaps if r.ok else (math.inf,))]


def latency_quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile of latencies (an infinite one never finished); NaN when empty."""
    found = percentile(values, q, method="nearest-rank")
    return math.nan if found is None else found


@dataclass(slots=True)
class StepSummary:
    """What capacity keeps of a step: its figures, its verdict and why."""

    offered: float
    seed: int
    requests: int
    percentiles: dict[str, float]  # "p99_ttft" etc., seconds
    intervals: dict[str, tuple[float, float]]  # each SLO's quantile interval, by its key
    limits: dict[str, float]  # each SLO's bound, by its key
    goodput: float  # requests/s that met every SLO
    throughput_tokens: float  # output tokens/s over the time the requests took
    mean_running: float
    status: StepStatus  # the load runner's judgement of the step
    verdict: Verdict
    meets: bool  # the point estimates meet every SLO (and the step is valid)
    reason: str | None = None  # why it is not a result (the runner's), or what decided it
    duration_s: float = 0.0  # measured seconds (a step extended for power sums its parts)
    engine_tokens: float | None = None  # the engine's own output tokens/s over the same span
    lag_p99_s: float = 0.0
    client_cpu_ms: float | None = None  # client CPU per request
    # How busy the client's machine was (Linux PSI "some" avg10, percent; the highest of the step's
    # parts): a step read while the client waited for a CPU has latencies the engine did not cause.
    cpu_pressure: float | None = None
    parts: int = 1  # independent parts the step was measured in
    notes: list[str] = field(default_factory=list)

    @property
    def worst_ratio(self) -> float:
        """The largest quantile / bound over the SLOs (above 1: missed); infinite when overloaded."""
        if self.status == "overloaded":
            return math.inf
        return max(self.percentiles.get(key, math.inf) / limit for key, limit in self.limits.items())


def summarise(step: StepResult, slos: Sequence[Slo], seed: int, confidence: float = 0.95) -> StepSummary:
    """Judge `step` against `slos` (see the module docstring)."""
    records = step.records
    percentiles: dict[str, float] = {}
    for metric in METRICS:
        values = observations(records, metric)
        for q in {0.5, 0.99, *(s.quantile for s in slos if s.metric == metric)}:
            percentiles[f"p{q * 100:g}_{metric}"] = latency_quantile(values, q)
    intervals = {}
    parts = step.split()
    for slo in slos:
        measured = [observations(part, slo.metric) for part in parts]
        low, high, _ = quantile_interval(measured, slo.quantile, slo.limit_s, confidence)
        intervals[slo.key] = (low, high)
    good = sum(1 for r in records if all(latency(r, s.metric) <= s.limit_s for s in slos))
    running = [s.running for s in step.engine_samples if 0 <= s.at_s <= step.duration_s]
    throughput = step.throughput or delivered(records)
    within = bool(records) and all(percentiles[s.key] <= s.limit_s for s in slos)
    verdict = _verdict(step, slos, intervals)
    return StepSummary(
        offered=step.offered,
        seed=seed,
        requests=len(records),
        percentiles=percentiles,
        intervals=intervals,
        limits={slo.key: slo.limit_s for slo in slos},
        goodput=good / step.duration_s if step.duration_s > 0 else 0.0,
        throughput_tokens=throughput.tokens_per_s,
        mean_running=sum(running) / len(running) if running else math.nan,
        status=step.status,
        verdict=verdict,
        meets=within and step.valid,
        reason=step.invalid_reason,
        duration_s=step.duration_s,
        engine_tokens=throughput.engine_tokens_per_s,
        lag_p99_s=step.schedule_lag_p99_s,
        client_cpu_ms=step.client.cpu_per_request_ms if step.client is not None else None,
        cpu_pressure=step.client.cpu_pressure if step.client is not None else None,
        parts=len(parts),
    )


def _verdict(step: StepResult, slos: Sequence[Slo], intervals: dict[str, tuple[float, float]]) -> Verdict:
    if step.status == "overloaded":
        return "miss"
    if step.status in ("client_bound", "engine_failed"):
        return step.status
    if not step.records:
        return "undecided"
    if any(intervals[s.key][0] > s.limit_s for s in slos):
        return "miss"
    if all(intervals[s.key][1] <= s.limit_s for s in slos):
        return "pass"
    return "undecided"
