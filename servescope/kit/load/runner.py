"""The HTTP step runner: an open-loop schedule (or closed-loop clients) against a real endpoint.

It implements `StepRunner`, so capacity search and tuning drive a real engine through it exactly as
they drive the simulated one. In-flight requests are capped; a request that waits for the cap is sent
late, and that lateness is the schedule lag that invalidates the step, never a silently dropped request.
A warm-up (`warmup_s`) is the first part of the same schedule: sent, answered and counted in the
throughput, but not in the latency records. The engine's /metrics is sampled on a thread of its own
(`EngineWatch`), and the CPU the sending cost is measured apart from it.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp

from servescope.kit.load.client import (
    Clock,
    RequestHooks,
    RequestSpec,
    TokenSource,
    new_client,
    now_from,
    send,
)
from servescope.kit.load.engine_metrics import EngineWatch, observed
from servescope.kit.load.metrics import LoadMetrics
from servescope.kit.load.pressure import cpu_pressure
from servescope.kit.load.records import ClientCost, LoopMode, RequestRecord, StepResult
from servescope.kit.load.schedule import (
    Arrival,
    LengthDistribution,
    Shape,
    arrival_times,
    step_prompts_seed,
)
from servescope.kit.load.validity import ValidityRules, client_step, percentile, schedule_lags

CLOSED_LOOP_SHAPES = 4096  # shapes drawn up front for closed-loop clients, cycled
START_LEAD_S = 0.05  # the schedule starts this long after setup, so the first sends are not late by it
PROGRESS_EVERY_S = 5.0
# Without a configured cap, the in-flight bound is what the requests' own deadlines allow (the rate times
# the timeout), within these: below the lower one the cap costs nothing, and the upper keeps the sockets
# within a process's usual file limit.
MIN_IN_FLIGHT, MAX_IN_FLIGHT = 256, 8192


class ShapeSource(Protocol):
    """Draws the requests of a step (a `Workload`, a `LengthDistribution`, a replayed `ShapeList`)."""

    def sample(self, count: int, seed: int) -> list[Shape]: ...


@dataclass
class _Tally:
    """Every finished request of a step, as it finishes (also into the live metrics)."""

    metrics: LoadMetrics | None
    records: list[RequestRecord] = field(default_factory=list)
    sources: Counter[TokenSource] = field(default_factory=Counter)
    sent: int = 0

    def add(self, record: RequestRecord, source: TokenSource) -> None:
        self.records.append(record)
        self.sources[source] += 1
        if self.metrics is not None:
            self.metrics.finished(record)


@dataclass
class HttpStepRunner:
    """One step = one schedule at `offered` req/s (open) or `offered` concurrent clients (closed)."""

    spec: RequestSpec
    shapes: ShapeSource = field(default_factory=LengthDistribution)
    mode: LoopMode = "open"
    arrival: Arrival = "poisson"
    cv: float = 1.0
    # The most requests in flight; None: as many as can be outstanding when each has its own deadline,
    # so that a healthy engine's latency never holds a send back (`in_flight_cap`).
    max_in_flight: int | None = 256
    rules: ValidityRules = field(default_factory=ValidityRules)
    engine_metrics_url: str | None = None
    metrics: LoadMetrics | None = None
    warmup_s: float = 0.0
    progress: Callable[[str], None] | None = None  # told how a step goes every PROGRESS_EVERY_S
    hooks: RequestHooks | None = None  # a header on every request, its answer read (user ids)

    def in_flight_cap(self, offered: float) -> int:
        """The most requests in flight at once in a step at `offered` (req/s, or clients when closed).

        A cap that binds turns an open loop into a closed one: past it sends wait, and the wait reads as
        the client's schedule lag though the engine's latency caused it (Little's law: in flight = rate x
        latency; 256 in flight at 176 req/s is any latency over 1.45 s). Without a configured cap the
        bound is the rate times the timeout, which no request outlives."""
        if self.max_in_flight is not None:
            return self.max_in_flight
        return min(MAX_IN_FLIGHT, max(MIN_IN_FLIGHT, math.ceil(offered * (self.spec.timeout_s + 1.0))))

    def run_step(self, offered: float, duration_s: float, *, seed: int) -> StepResult:
        if self.mode == "closed":
            return asyncio.run(self._measure(offered, duration_s, None, seed))
        whole = arrival_times(
            offered, self.warmup_s + duration_s, arrival=self.arrival, cv=self.cv, seed=seed
        )
        return asyncio.run(self._measure(offered, duration_s, [t - self.warmup_s for t in whole], seed))

    def run_schedule(self, times: Sequence[float], duration_s: float, *, seed: int) -> StepResult:
        """An open-loop step over a given schedule (a replayed production curve), with no warm-up."""
        offered = len(times) / duration_s if duration_s > 0 else 0.0
        saved, self.warmup_s = self.warmup_s, 0.0
        try:
            return asyncio.run(self._measure(offered, duration_s, list(times), seed))
        finally:
            self.warmup_s = saved

    async def _measure(
        self, offered: float, duration_s: float, times: list[float] | None, seed: int
    ) -> StepResult:
        tally = _Tally(self.metrics)
        watch = EngineWatch(self.engine_metrics_url) if self.engine_metrics_url else None
        warmup = self.warmup_s if times is not None else 0.0
        cap = self.in_flight_cap(offered)
        prompts = step_prompts_seed(seed, offered)
        async with new_client(cap) as client:
            if watch is not None:
                await asyncio.to_thread(watch.open)
            began, cpu_before = time.perf_counter(), time.process_time()
            clock = now_from(began + START_LEAD_S + warmup)
            if watch is not None:
                watch.start(clock)
            if self.metrics is not None:
                self.metrics.step_started(self.mode, offered)
            reporting = asyncio.create_task(self._report(clock, duration_s, tally))
            try:
                # Both loops send through one client on one clock, counted in one tally.
                if times is None:
                    await self._closed(
                        client, clock, tally, prompts, clients=int(offered), duration_s=duration_s
                    )
                else:
                    await self._open(client, clock, tally, prompts, times, cap=cap)
            finally:
                reporting.cancel()
            cpu = time.process_time() - cpu_before
            wall = time.perf_counter() - began
        if watch is not None:
            await asyncio.to_thread(watch.close)
            cpu -= watch.cpu_s
        cost = ClientCost(max(0.0, cpu), wall, tally.sent, cpu_pressure())
        return self._result(
            offered=offered, duration_s=duration_s, tally=tally, watch=watch, cost=cost, warmup_s=warmup
        )

    async def _report(self, clock: Clock, duration_s: float, tally: _Tally) -> None:
        """Live progress within a step: sent, answered, in flight, the lag so far."""
        if self.progress is None:
            return
        while True:
            await asyncio.sleep(PROGRESS_EVERY_S)
            lag = percentile(schedule_lags(tally.records), 0.99) or 0.0
            self.progress(
                f"    {clock():5.0f}/{duration_s:g} s: {tally.sent} sent, {len(tally.records)} answered, "
                f"{tally.sent - len(tally.records)} in flight, lag p99 {lag * 1000:.0f} ms"
            )

    async def _open(
        self,
        client: aiohttp.ClientSession,
        clock: Clock,
        tally: _Tally,
        seed: int,
        times: list[float],
        *,
        cap: int,
    ) -> None:
        gate = asyncio.Semaphore(cap)
        tasks = []
        for at, shape in zip(times, self.shapes.sample(len(times), seed), strict=True):
            delay = at - clock()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(
                asyncio.create_task(
                    self._gated(gate=gate, client=client, shape=shape, at=at, clock=clock, tally=tally)
                )
            )
        if tasks:
            # Past the schedule every request has its own timeout; what still waits for the cap then is
            # cut off and recorded as not sent.
            _, pending = await asyncio.wait(tasks, timeout=self.spec.timeout_s + 1.0)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _gated(
        self,
        *,
        gate: asyncio.Semaphore,
        client: aiohttp.ClientSession,
        shape: Shape,
        at: float,
        clock: Clock,
        tally: _Tally,
    ) -> None:
        sent_at: float | None = None
        try:
            async with gate:
                sent_at = clock()
                tally.sent += 1
                if self.metrics is not None:
                    self.metrics.sent(sent_at - at)
                record, source = await send(client, self.spec, shape, at, clock, hooks=self.hooks)
        except asyncio.CancelledError:
            reason = "not_sent" if sent_at is None else "cancelled"
            tally.add(RequestRecord(at, sent_at, None, None, shape.prompt_tokens, 0, reason), "none")
            raise
        tally.add(record, source)

    async def _closed(
        self,
        client: aiohttp.ClientSession,
        clock: Clock,
        tally: _Tally,
        seed: int,
        *,
        clients: int,
        duration_s: float,
    ) -> None:
        shapes = self.shapes.sample(CLOSED_LOOP_SHAPES, seed)

        async def one_client(index: int) -> None:
            turn = index
            while clock() < duration_s:
                shape = shapes[turn % len(shapes)]
                turn += clients
                at = clock()  # closed loop: a request is due when the previous answer arrived
                tally.sent += 1
                if self.metrics is not None:
                    self.metrics.sent(0.0)
                record, source = await send(client, self.spec, shape, at, clock, hooks=self.hooks)
                tally.add(record, source)

        await asyncio.gather(*(one_client(i) for i in range(max(1, clients))))

    def _result(
        self,
        *,
        offered: float,
        duration_s: float,
        tally: _Tally,
        watch: EngineWatch | None,
        cost: ClientCost,
        warmup_s: float,
    ) -> StepResult:
        # One piece: the step's notes, throughput, engine view and verdict are assembled together.
        label = (
            f"open loop, {self.arrival} arrivals"
            if self.mode == "open"
            else "closed loop (fixed concurrency)"
        )
        notes = [
            label,
            f"tokens: {tally.sources['usage']} from usage, {tally.sources['chunks']} from the chunk count, "
            f"{tally.sources['mismatch']} usage/chunk mismatches",
        ]
        engine, throughput = observed(watch, tally.records)
        if watch is not None and watch.failures:
            notes.append(f"engine /metrics: {watch.failures} failed reads")
        measured = [r for r in tally.records if r.scheduled_s >= 0]
        result = client_step(
            self.mode,
            offered,
            duration_s,
            measured,
            self.rules,
            engine=engine,
            notes=notes,
            throughput=throughput,
            client=cost,
            warmup_s=warmup_s,
        )
        if self.metrics is not None:
            self.metrics.step_finished(result)
        return result
