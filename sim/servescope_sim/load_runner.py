"""Load steps against the simulated engine on its virtual clock: a capacity search runs in seconds.

Open loop: the engine's own arrival process (Poisson, or constant spacing) is the precomputed schedule;
it never waits for answers, so a rate above capacity grows a backlog, as it would against a real
engine. Closed loop: `offered` clients, each sending again when its answer is complete. Each step boots
a fresh engine from `seed`, runs a warm-up at the step's load, measures `duration_s`, then stops the load
and lets requests in flight finish for up to `drain_s`; those still unfinished are recorded as timeouts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from servescope.kit.load.records import EngineSample, LoopMode, RequestRecord, StepResult, delivered
from servescope.kit.load.validity import EngineView, ValidityRules, client_step
from servescope_sim.engine_config import EngineConfig
from servescope_sim.engine_model import FinishedRequest
from servescope_sim.vllm_engine import EngineStartError, SimulatedEngine

__all__ = ["EngineStartError", "SimulatedStepRunner", "configured", "start_simulated"]

MAX_HISTORY = 500_000  # finished requests one step keeps: bounds memory at any rate
TTFT = "time_to_first_token_seconds"


@dataclass(frozen=True, slots=True)
class SimulatedStepRunner:
    """A `StepRunner` over `SimulatedEngine`, open or closed loop, on the virtual clock."""

    config: EngineConfig
    mode: LoopMode = "open"
    warmup_s: float = 5.0
    drain_s: float = 30.0
    sample_every_s: float = 0.5

    def run_step(self, offered: float, duration_s: float, *, seed: int) -> StepResult:
        """One step at `offered` requests/s (open) or clients (closed) for `duration_s` measured seconds."""
        if offered <= 0 or duration_s <= 0:
            raise ValueError(f"offered and duration_s must be > 0, got {offered} and {duration_s}")
        idle = replace(self.config, arrival_rate=0.0, concurrency=0)
        engine = SimulatedEngine(idle, seed=seed, history=MAX_HISTORY)
        self._set_load(engine, offered)
        start, end = self.warmup_s, self.warmup_s + duration_s
        engine.advance_to(start)
        before = list(engine.stats.histograms[TTFT].counts)
        samples = self._sample(engine, start, end)
        self._set_load(engine, 0.0)
        deadline = end + self.drain_s
        while (engine.num_running or engine.num_waiting) and engine.now < deadline:
            engine.advance_to(min(deadline, engine.now + 1.0))
        after = engine.stats.histograms[TTFT]
        records = _records(engine, start, end)
        buckets = _cumulative(after.bounds, [a - b for a, b in zip(after.counts, before, strict=True)])
        # Judged by the load client's rules: the engine's queue growth and unanswered requests (a virtual
        # clock never falls behind its schedule).
        engine_view = EngineView(samples, buckets)
        notes = ("simulated engine, virtual clock",)
        return client_step(
            self.mode,
            offered,
            duration_s,
            records,
            ValidityRules(),
            engine=engine_view,
            notes=notes,
            throughput=delivered(records),
            warmup_s=self.warmup_s,
        )

    def _set_load(self, engine: SimulatedEngine, offered: float) -> None:
        if self.mode == "open":
            engine.set_load(arrival_rate=offered)
        else:
            engine.set_load(concurrency=round(offered))

    def _sample(self, engine: SimulatedEngine, start: float, end: float) -> tuple[EngineSample, ...]:
        samples = []
        steps = max(1, math.ceil((end - start) / self.sample_every_s))
        for i in range(1, steps + 1):
            t = min(end, start + i * self.sample_every_s)
            engine.advance_to(t)
            samples.append(EngineSample(t - start, float(engine.num_running), float(engine.num_waiting)))
        return tuple(samples)


def _records(engine: SimulatedEngine, start: float, end: float) -> tuple[RequestRecord, ...]:
    """Requests that arrived in the measured window, times from its start; unfinished ones as timeouts."""
    found = [_record(done, start) for done in engine.finished if start <= done.arrival < end]
    found += [
        RequestRecord(at - start, at - start, None, None, error="timeout")
        for at in engine.in_flight()
        if start <= at < end
    ]
    return tuple(sorted(found, key=lambda record: record.scheduled_s))


def _record(done: FinishedRequest, start: float) -> RequestRecord:
    first = None if done.first_token is None else done.first_token - start
    return RequestRecord(
        scheduled_s=done.arrival - start,
        sent_s=done.arrival - start,
        first_token_s=first,
        done_s=done.finished - start,
        prompt_tokens=done.prompt_tokens,
        output_tokens=done.generation_tokens,
        error="abort" if done.reason == "abort" else None,
    )


def _cumulative(bounds: tuple[float, ...], counts: list[int]) -> tuple[tuple[float, float], ...]:
    out, running = [], 0
    for bound, n in zip((*bounds, math.inf), counts, strict=True):
        running += n
        out.append((bound, float(running)))
    return tuple(out)


LOAD_FIELDS = {"arrival_rate", "concurrency", "cost"}  # set by each step, not engine flags
ENGINE_FLAGS = frozenset(field.name for field in fields(EngineConfig)) - LOAD_FIELDS


def configured(base: EngineConfig, params: Mapping[str, object]) -> EngineConfig:
    """`base` with vLLM flags from `params`; raises ValueError naming an unknown flag or a bad value."""
    unknown = sorted(set(params) - ENGINE_FLAGS)
    if unknown:
        raise ValueError(f"not a simulated engine flag: {', '.join(unknown)}")
    return replace(base, **params)  # type: ignore[arg-type]


def start_simulated(
    params: Mapping[str, object],
    *,
    mode: LoopMode = "open",
    warmup_s: float = 5.0,
    base: EngineConfig | None = None,
) -> SimulatedStepRunner:
    """Start an engine with `params` (raises EngineStartError as vLLM would fail) and return its runner."""
    config = configured(base or EngineConfig(), params)
    SimulatedEngine(config)  # the start check: memory that does not fit fails here, before any load
    return SimulatedStepRunner(config, mode=mode, warmup_s=warmup_s)
