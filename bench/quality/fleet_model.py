"""A Kubernetes fleet of vLLM pods over time, stated as data: what runs where, what each engine serves and
how fast, and what Kubernetes says about it. `fleet_series.py` turns it into the series each topology
gives Prometheus, `fleet_truth.py` into the incidents an operator must hear about.

Time is seconds from the scenario's start; every quantity is a function of it. A pod goes through
phases: `loading` (created, its server not listening yet), `serving`, `crashloop` (its container
restarts: it answers 60 s after each 4 minutes of crash and back-off), `hung` (its server answers, its
scheduler makes no progress), `dead` (its process gone, its pod and GPUs still there), `terminating`
(being deleted: the engine stops), then gone. Requests follow the model's load, split evenly over its
engines that answer; latencies are lognormal, so the share of requests over any bound is exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from servescope_sim.engine_stats import REQUEST_SECONDS_BUCKETS, TTFT_BUCKETS

STEP = 30.0  # the scrape and evaluation interval, seconds
GIB = 1024**3
MIB = 1024**2
# vLLM's own layouts (the simulator's), up to what these requests reach.
VLLM_TTFT_BUCKETS = tuple(b for b in TTFT_BUCKETS if b <= 10)
VLLM_E2E_BUCKETS = tuple(b for b in REQUEST_SECONDS_BUCKETS if b <= 120)
CRASH_CYCLE, CRASH_UP = 300.0, 60.0  # a crash loop answers the last CRASH_UP seconds of each CRASH_CYCLE
ANSWERING = ("serving", "crashloop-up", "hung")
Curve = Callable[[float], float]


def constant(value: float) -> Curve:
    return lambda t: value


def ramp(start: float, end: float, t0: float, t1: float) -> Curve:
    """`start` until t0, linear to `end` at t1, `end` after."""
    return lambda t: start if t <= t0 else end if t >= t1 else start + (end - start) * (t - t0) / (t1 - t0)


def window(base: Curve, value: float, t0: float, t1: float) -> Curve:
    """`base`, but `value` from t0 to t1."""
    return lambda t: value if t0 <= t < t1 else base(t)


@dataclass(frozen=True)
class Phase:
    start: float
    state: str  # loading, serving, crashloop, hung, dead, terminating, gone


@dataclass(frozen=True)
class Pod:
    """One engine pod: its model, node, GPUs (indices on the node), address and phases."""

    name: str
    model: str
    node: str
    gpus: Sequence[int]
    address: str
    phases: Sequence[Phase]
    namespace: str = "llm"

    @property
    def endpoint(self) -> str:
        return f"http://{self.address}:8000/metrics"

    def state(self, t: float) -> str | None:
        """The pod's state at t: None before it exists; `crashloop-up`/`crashloop-down` inside a loop."""
        current = None
        for phase in self.phases:
            if phase.start <= t:
                current = phase
        if current is None or current.state == "gone":
            return None
        if current.state == "crashloop":
            return (
                "crashloop-up"
                if (t - current.start) % CRASH_CYCLE >= CRASH_CYCLE - CRASH_UP
                else "crashloop-down"
            )
        return current.state

    def restarts(self, t: float) -> int:
        """Container restarts so far (a crash loop restarts once a cycle): the engine's counters reset."""
        count = 0
        for phase in self.phases:
            if phase.state == "crashloop" and phase.start <= t:
                end = min(t, self._end(phase))
                count += int((end - phase.start) // CRASH_CYCLE) + 1
        return count

    def _end(self, phase: Phase) -> float:
        later = [p.start for p in self.phases if p.start > phase.start]
        return min(later, default=math.inf)


@dataclass(frozen=True)
class Latency:
    """A lognormal latency: its median and its log-space deviation."""

    median: float
    sigma: float = 0.45

    def share_over(self, bound: float) -> float:
        if bound <= 0:
            return 1.0
        z = (math.log(bound) - math.log(self.median)) / self.sigma
        return 0.5 * math.erfc(z / math.sqrt(2))


@dataclass(frozen=True)
class Model:
    """A model: its load (requests/s over all its engines) and how its engines serve at each moment."""

    name: str
    load: Curve = field(default_factory=lambda: constant(4.0))
    ttft: Callable[[float], Latency] = field(default_factory=lambda: lambda t: Latency(0.12))
    e2e: Callable[[float], Latency] = field(default_factory=lambda: lambda t: Latency(4.0))
    kv: Curve = field(default_factory=lambda: constant(0.35))  # KV usage of each engine
    busy: Curve = field(default_factory=lambda: constant(0.55))  # its GPUs' busy share
    waiting: Curve = field(default_factory=lambda: constant(0.0))
    preemptions: Curve = field(default_factory=lambda: constant(0.0))  # per engine per second
    ttft_buckets: tuple[float, ...] = VLLM_TTFT_BUCKETS


@dataclass(frozen=True)
class Node:
    """A GPU node: its GPUs, its exporter (answering, down or absent over time), its memory."""

    name: str
    gpus: int = 2
    exporter: Callable[[float], str] = field(default_factory=lambda: lambda t: "up")  # up, down, absent
    leak: Callable[[int, float], float] = field(default_factory=lambda: lambda gpu, t: 0.0)  # bytes leaked
    memory_per_busy: float = 8 * GIB  # memory that follows the load (activations)
    total_memory: float = 141e9


@dataclass(frozen=True)
class Fleet:
    """The whole scenario: nodes, models, pods, whether kube-state-metrics is there, for how long."""

    name: str
    description: str
    minutes: float
    nodes: Sequence[Node]
    models: Sequence[Model]
    pods: Sequence[Pod]
    kube_state_metrics: bool = True
    slow: bool = False

    @property
    def duration(self) -> float:
        return self.minutes * 60

    def steps(self) -> range:
        return range(1, int(self.duration // STEP) + 1)

    def model(self, name: str) -> Model:
        return next(m for m in self.models if m.name == name)

    def answering(self, model: str, t: float) -> list[Pod]:
        return [p for p in self.pods if p.model == model and p.state(t) in ANSWERING]
