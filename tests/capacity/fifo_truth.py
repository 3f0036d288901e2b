"""The ground truth of capacity tests: an engine of C FIFO slots, a fixed prefill time and a fixed time
per further token, whose knee a discrete-event queue simulation computes (never a measurement of it).

`true_knee` simulates Poisson arrivals into the C slots for a long steady state and finds, by bisection
on common random numbers, the rate where the q-quantile of TTFT (the wait for a slot plus the prefill)
crosses the bound. `VirtualFifoRunner` is a `StepRunner` over the same queue on a virtual clock (for
the statistical studies: hundreds of searches in seconds), built independently of the HTTP mock engine
(`servescope load mock-server`), whose knee the same simulation gives.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass
from functools import cache

from servescope.kit.load.records import EngineSample, RequestRecord, StepResult
from servescope.kit.load.validity import EngineView, ValidityRules, client_step

STEADY_REQUESTS = 300_000
BURN_IN = 5_000


@dataclass(frozen=True)
class FifoEngine:
    """C slots; a request holds one for prefill + (tokens - 1) x per-token time, FIFO."""

    slots: int = 4
    prefill_s: float = 0.04
    token_s: float = 0.005
    output_tokens: int = 32

    @property
    def service_s(self) -> float:
        return self.prefill_s + (self.output_tokens - 1) * self.token_s

    @property
    def capacity(self) -> float:
        return self.slots / self.service_s

    def slower(self, factor: float) -> FifoEngine:
        """The same engine with every time `factor` as long (a slowdown)."""
        return FifoEngine(self.slots, self.prefill_s * factor, self.token_s * factor, self.output_tokens)


def queue(engine: FifoEngine, arrivals: list[float]) -> list[tuple[float, float, float]]:
    """(arrival, start, done) of each arrival, in order, through the C FIFO slots."""
    free = [-math.inf] * engine.slots
    out = []
    for at in arrivals:
        start = max(at, heapq.heappop(free))
        done = start + engine.service_s
        heapq.heappush(free, done)
        out.append((at, start, done))
    return out


@cache
def _gaps(seed: int, count: int) -> tuple[float, ...]:
    rng = random.Random(seed)
    return tuple(rng.expovariate(1.0) for _ in range(count))


def ttft_quantile(engine: FifoEngine, rate: float, q: float, seed: int = 1) -> float:
    """The steady-state q-quantile of TTFT at `rate` (unit exponential gaps scaled: common random numbers)."""
    at, arrivals = 0.0, []
    for gap in _gaps(seed, STEADY_REQUESTS):
        at += gap / rate
        arrivals.append(at)
    ttfts = sorted(
        start - arrived + engine.prefill_s for arrived, start, _ in queue(engine, arrivals)[BURN_IN:]
    )
    return ttfts[min(len(ttfts) - 1, math.ceil(q * len(ttfts)) - 1)]


@cache
def true_knee(engine: FifoEngine, bound_s: float, q: float = 0.99, tolerance: float = 0.005) -> float:
    """The rate where the steady-state q-quantile of TTFT crosses `bound_s` (bisection to `tolerance`)."""
    low, high = 0.0, engine.capacity
    while high - low > tolerance * high:
        middle = (low + high) / 2
        if ttft_quantile(engine, middle, q) <= bound_s:
            low = middle
        else:
            high = middle
    return (low + high) / 2


@dataclass(frozen=True)
class VirtualFifoRunner:
    """Open-loop steps into the FIFO engine on a virtual clock, judged by the load client's rules."""

    engine: FifoEngine
    warmup_s: float = 5.0
    sample_every_s: float = 0.5

    def run_step(self, offered: float, duration_s: float, *, seed: int) -> StepResult:
        rng = random.Random(seed)
        at, arrivals = -self.warmup_s, []
        while True:
            at += rng.expovariate(offered)
            if at >= duration_s:
                break
            arrivals.append(at)
        booked = queue(self.engine, arrivals)
        e = self.engine
        records = tuple(
            RequestRecord(
                a, a, s + e.prefill_s, d, 16, e.output_tokens, None, (e.token_s,) * (e.output_tokens - 1)
            )
            for a, s, d in booked
            if a >= 0
        )
        samples = tuple(
            EngineSample(
                t,
                float(sum(1 for _, s, d in booked if s <= t < d)),
                float(sum(1 for a, s, _ in booked if a <= t < s)),
            )
            for t in (k * self.sample_every_s for k in range(1, int(duration_s / self.sample_every_s) + 1))
        )
        rules = ValidityRules()
        view = EngineView(samples)
        return client_step("open", offered, duration_s, records, rules, engine=view, warmup_s=self.warmup_s)
