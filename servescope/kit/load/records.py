"""What one load step produced: per-request timings and the step's own verdict, engine-independent.

Every runner (HTTP against a real engine, the simulated engine on a virtual clock) returns a
`StepResult`, so capacity search, tuning and reports never care which one measured it. Times are
seconds from the start of the step's measured window. Latency is measured from the *scheduled* send
time, because an open-loop client that falls behind its schedule hides exactly the queueing a P99 SLO
is about (coordinated omission); the service time from the actual send is kept beside it.

A step that cannot stand as a measurement says which side is at fault: the client (it could not keep
its schedule: `client_bound`), the engine's capacity (its queue grew: `overloaded`, a rate above what it
sustains) or the engine itself (most requests failed: `engine_failed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

LoopMode = Literal["open", "closed"]
# Who is at fault when a step is not a clean measurement.
Fault = Literal["client", "overload", "engine"]
StepStatus = Literal["valid", "client_bound", "overloaded", "engine_failed"]
STATUS_OF_FAULT: dict[Fault, StepStatus] = {
    "client": "client_bound",
    "overload": "overloaded",
    "engine": "engine_failed",
}


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request: when it was due, sent, answered first and finished; None where it never was."""

    scheduled_s: float
    sent_s: float | None
    first_token_s: float | None
    done_s: float | None
    prompt_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None  # a short reason ("timeout", "http_503", "connect"); None when it succeeded
    # Seconds between consecutive chunks with content after the first: the inter-token latency as the
    # client sees it (one chunk may carry several tokens when the server batches its stream).
    chunk_gaps: tuple[float, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None and self.done_s is not None

    @property
    def ttft_s(self) -> float | None:
        """Time to first token from the scheduled send (what a user of an open-loop arrival sees)."""
        return None if self.first_token_s is None else self.first_token_s - self.scheduled_s

    @property
    def e2e_s(self) -> float | None:
        return None if self.done_s is None else self.done_s - self.scheduled_s

    @property
    def service_ttft_s(self) -> float | None:
        """Time to first token from the actual send: the engine's share only."""
        if self.first_token_s is None or self.sent_s is None:
            return None
        return self.first_token_s - self.sent_s

    @property
    def tpot_s(self) -> float | None:
        """Mean time per output token after the first."""
        if self.done_s is None or self.first_token_s is None or self.output_tokens < 2:
            return None
        return (self.done_s - self.first_token_s) / (self.output_tokens - 1)


@dataclass(frozen=True, slots=True)
class EngineSample:
    """The engine's own view at one moment of a step, read from its /metrics (or the simulator)."""

    at_s: float
    running: float
    waiting: float


@dataclass(frozen=True, slots=True)
class Throughput:
    """What the step delivered over the time its requests actually took, and the engine's own count.

    The span runs from the first send to the last answer (warm-up included, drain included): at
    overload the answers keep coming after the schedule ends, and dividing by the schedule's window
    would report more than the engine made. The engine's counters are read just before the first send
    and just after the last answer, so both figures cover the same work.
    """

    span_s: float
    requests: int  # answered
    output_tokens: int
    engine_tokens: float | None = None  # vllm:generation_tokens_total gained over the engine's span
    engine_span_s: float | None = None

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.span_s if self.span_s > 0 else 0.0

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.span_s if self.span_s > 0 else 0.0

    @property
    def engine_tokens_per_s(self) -> float | None:
        if self.engine_tokens is None or not self.engine_span_s:
            return None
        return self.engine_tokens / self.engine_span_s


@dataclass(frozen=True, slots=True)
class ClientCost:
    """What sending the step cost the client: its CPU (sampling excluded) and how busy the machine was."""

    cpu_s: float  # CPU seconds of the sending process over the step, the engine sampling's excluded
    wall_s: float
    requests: int
    cpu_pressure: float = 0.0  # share of time some task waited for a CPU (Linux PSI avg10), percent

    @property
    def cpu_per_request_ms(self) -> float:
        return 1000.0 * self.cpu_s / self.requests if self.requests else 0.0

    @property
    def busy(self) -> float:
        """Share of one core the client used over the step."""
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True, slots=True)
class StepResult:
    """One load step at one offered rate (open loop) or concurrency (closed loop)."""

    mode: LoopMode
    offered: float  # requests per second (open) or concurrent clients (closed)
    duration_s: float
    records: tuple[RequestRecord, ...]
    schedule_lag_p99_s: float = 0.0  # how late sends went out against the schedule
    engine_samples: tuple[EngineSample, ...] = ()
    # The engine's TTFT histogram over the step (cumulative bucket counts by upper bound), for the
    # client-versus-server cross-check; empty when the runner cannot read it.
    engine_ttft_buckets: tuple[tuple[float, float], ...] = ()
    # The engine's mean TTFT over the step (its histogram's _sum / _count). Beside the client's mean it
    # measures the path between them (HTTP, the API server's tokenising and streaming), which the
    # engine's clock leaves out and a tail comparison must discount.
    engine_ttft_mean_s: float | None = None
    invalid_reason: str | None = None  # why the step cannot stand as a result (see `fault`)
    notes: tuple[str, ...] = field(default=())
    fault: Fault | None = None  # the side at fault when invalid_reason is set
    throughput: Throughput | None = None
    client: ClientCost | None = None
    warmup_s: float = 0.0  # seconds of the same schedule sent before the window, not in `records`
    # A step measured in independent parts (one after another, each with its own seed and warm-up): how
    # many records each part holds, in order. Empty: one part.
    parts: tuple[int, ...] = ()

    @property
    def valid(self) -> bool:
        return self.invalid_reason is None

    @property
    def status(self) -> StepStatus:
        if self.invalid_reason is None:
            return "valid"
        return STATUS_OF_FAULT[self.fault or "client"]

    @property
    def achieved_rate(self) -> float:
        """Requests sent per second of the step (see `achieved_rate`)."""
        return achieved_rate(self.records, self.duration_s)

    def split(self) -> list[tuple[RequestRecord, ...]]:
        """The records of each independent part, in order."""
        sizes, out, start = self.parts or (len(self.records),), [], 0
        for size in sizes:
            out.append(self.records[start : start + size])
            start += size
        return out


def achieved_rate(records: Sequence[RequestRecord], duration_s: float) -> float:
    """Requests sent per second of the span the sends took: the window, or longer when they ran late."""
    sent = [r.sent_s for r in records if r.sent_s is not None]
    span = max([duration_s, *sent])
    return len(sent) / span if span > 0 else 0.0


def delivered(records: Sequence[RequestRecord]) -> Throughput:
    """Throughput over the time the requests took: first send to last answer (no engine counters)."""
    sent = [r.sent_s for r in records if r.sent_s is not None]
    done = [r.done_s for r in records if r.ok and r.done_s is not None]
    span = (max(done) - min(sent)) if sent and done else 0.0
    tokens = sum(r.output_tokens for r in records if r.ok)
    return Throughput(max(span, 0.0), len(done), tokens)


class StepRunner(Protocol):
    """Runs one load step; HTTP against an engine, or the simulated engine on a virtual clock."""

    def run_step(self, offered: float, duration_s: float, *, seed: int) -> StepResult: ...
