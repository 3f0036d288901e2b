"""What one load step produced: per-request timings and the step's own validity, engine-independent.

Every runner (HTTP against a real engine, the simulated engine on a virtual clock) returns a
`StepResult`, so capacity search, tuning and reports never care which one measured it. Times are
seconds from the step's start. Latency is measured from the *scheduled* send time, because an
open-loop client that falls behind its schedule hides exactly the queueing a P99 SLO is about
(coordinated omission); the service time from the actual send is kept beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

LoopMode = Literal["open", "closed"]


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
    invalid_reason: str | None = None  # set by the runner when the step cannot stand as a result
    notes: tuple[str, ...] = field(default=())

    @property
    def valid(self) -> bool:
        return self.invalid_reason is None

    @property
    def achieved_rate(self) -> float:
        """Requests sent per second of the step (see `achieved_rate`)."""
        return achieved_rate(self.records, self.duration_s)


def achieved_rate(records: Sequence[RequestRecord], duration_s: float) -> float:
    """Requests sent per second of the span the sends took: the window, or longer when they ran late."""
    sent = [r.sent_s for r in records if r.sent_s is not None]
    span = max([duration_s, *sent])
    return len(sent) / span if span > 0 else 0.0


class StepRunner(Protocol):
    """Runs one load step; HTTP against an engine, or the simulated engine on a virtual clock."""

    def run_step(self, offered: float, duration_s: float, *, seed: int) -> StepResult: ...
