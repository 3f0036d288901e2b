"""A statistically powered step: measured again (and pooled) until its quantile interval excludes the
bound, up to a cap; and a step the client could not drive, measured again before it is believed.

Each extension is one more step at the same rate with a seed of its own (its own arrivals, its own
warm-up); the parts are pooled in the order they ran, so the interval's effective count sees the
correlation inside each part. A part the client could not drive, or where the engine failed, ends the
extension: that verdict stands for the whole step.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from servescope.kit.capacity.steps import Slo, StepSummary, summarise
from servescope.kit.load.records import ClientCost, StepResult, StepRunner, Throughput

EXTENSION_SEED = 7919  # part k of a step at seed s runs with seed s + k * EXTENSION_SEED
REMEASURE_PAUSE_S = 2.0  # let a machine that was busy for a moment settle before measuring again
Progress = Callable[[str], None]


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _throughput(a: Throughput | None, b: Throughput | None) -> Throughput | None:
    if a is None or b is None:
        return a or b
    return Throughput(
        a.span_s + b.span_s,
        a.requests + b.requests,
        a.output_tokens + b.output_tokens,
        _sum(a.engine_tokens, b.engine_tokens),
        _sum(a.engine_span_s, b.engine_span_s),
    )


def _client(a: ClientCost | None, b: ClientCost | None) -> ClientCost | None:
    if a is None or b is None:
        return a or b
    return ClientCost(
        a.cpu_s + b.cpu_s, a.wall_s + b.wall_s, a.requests + b.requests, max(a.cpu_pressure, b.cpu_pressure)
    )


def _buckets(
    a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]
) -> tuple[tuple[float, float], ...]:
    counts: dict[float, float] = defaultdict(float)
    for upper, count in (*a, *b):
        counts[upper] += count
    return tuple(sorted(counts.items()))


def merge(first: StepResult, more: StepResult) -> StepResult:
    """Two parts of one step as one: `more`'s times follow `first`'s window."""
    offset = first.duration_s + more.warmup_s
    shifted = tuple(
        replace(
            r,
            scheduled_s=r.scheduled_s + offset,
            sent_s=None if r.sent_s is None else r.sent_s + offset,
            first_token_s=None if r.first_token_s is None else r.first_token_s + offset,
            done_s=None if r.done_s is None else r.done_s + offset,
        )
        for r in more.records
    )
    samples = tuple(replace(s, at_s=s.at_s + offset) for s in more.engine_samples)
    means = [m for m in (first.engine_ttft_mean_s, more.engine_ttft_mean_s) if m is not None]
    return replace(
        first,
        duration_s=offset + more.duration_s,
        records=first.records + shifted,
        schedule_lag_p99_s=max(first.schedule_lag_p99_s, more.schedule_lag_p99_s),
        engine_samples=first.engine_samples + samples,
        engine_ttft_buckets=_buckets(first.engine_ttft_buckets, more.engine_ttft_buckets),
        engine_ttft_mean_s=sum(means) / len(means) if means else None,
        invalid_reason=first.invalid_reason or more.invalid_reason,
        fault=first.fault or more.fault,
        notes=tuple(dict.fromkeys((*first.notes, *more.notes))),
        throughput=_throughput(first.throughput, more.throughput),
        client=_client(first.client, more.client),
        parts=(*(first.parts or (len(first.records),)), len(more.records)),
    )


@dataclass
class StepMeasurer:
    """Runs the steps of a search: powered when asked, measured again when the client fell behind."""

    runner: StepRunner
    slos: tuple[Slo, ...]
    duration_s: float
    max_parts: int  # a powered step's cap, in parts
    confidence: float = 0.95
    min_requests: int = 0  # each part lasts long enough for this many requests
    remeasure: int = 1  # times a client-bound step is measured again
    fallback: StepRunner | None = None  # measures again instead (Locust workers)
    progress: Progress | None = None

    def step(
        self, rate: float, seed: int, *, powered: bool, min_parts: int = 1
    ) -> tuple[StepSummary, StepResult]:
        """One step at `rate`: extended while undecided (when `powered`) or fewer than `min_parts`,
        re-measured when client-bound."""
        summary, result = self._powered(self.runner, rate, seed, powered, min_parts)
        for attempt in range(self.remeasure):
            if summary.verdict != "client_bound":
                break
            again = self.fallback or self.runner
            how = "through Locust workers" if self.fallback else "after a pause"
            self._say(f"    {rate:g} req/s: client-bound ({summary.reason}); measuring again {how}")
            time.sleep(REMEASURE_PAUSE_S)
            summary, result = self._powered(again, rate, seed + 100 * (attempt + 1), powered, min_parts)
        return summary, result

    def _powered(
        self, runner: StepRunner, rate: float, seed: int, powered: bool, min_parts: int
    ) -> tuple[StepSummary, StepResult]:
        # Only a powered step's parts must hold min_requests: a step that only steers the search (far
        # below the knee, at a low rate) would otherwise last many times --duration.
        length = (
            max(self.duration_s, self.min_requests / rate) if powered or min_parts > 1 else self.duration_s
        )
        result = runner.run_step(rate, length, seed=seed)
        summary = summarise(result, self.slos, seed, self.confidence)
        part = 1
        while part < min_parts or (powered and summary.verdict == "undecided" and part < self.max_parts):
            if summary.verdict in ("client_bound", "engine_failed"):
                break
            self._say(
                f"    {rate:g} req/s: undecided after {result.duration_s:.0f} s ({summary.requests} "
                f"requests, {_intervals(summary)}); extending"
            )
            more = runner.run_step(rate, length, seed=seed + part * EXTENSION_SEED)
            result, part = merge(result, more), part + 1
            summary = summarise(result, self.slos, seed, self.confidence)
        return summary, result

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)


def _intervals(summary: StepSummary) -> str:
    return ", ".join(f"{key} in [{low:.3g}, {high:.3g}] s" for key, (low, high) in summary.intervals.items())
