"""Scenarios as data: what happens on a node and when, and the incidents an operator should hear about.

A `Plan` is data: the node's layout, the GPUs' noise-free load over time, the faults (the production
simulator's `FaultPlan` windows: KV pressure, NVLink CRC storm, engine down, leak, GPU lost) and the
ground-truth incidents, each naming the alerts that must fire for it (`expect`, counted in recall) and
the alerts that are correct symptoms of it (`accept`: true when they fire, not required). An alert that
fires outside every incident listing it is a false positive.

Incident windows are conditions on the simulation's ground truth (see `truth.py`), so they follow what
really happened: a saturation incident is the time the GPU's noise-free load stayed above the
configured ratio for at least the alert's `for` (the operators' "over 85 % sustained"), a leak incident
runs from the leak's start to the OOM the simulator records. The plans themselves are in `library.py`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import ClassVar

from servescope_sim.engine_config import EngineConfig, StepCost
from servescope_sim.fault_scenarios import FaultPlan, Window
from servescope_sim.fleet import SimulatedFleet
from servescope_sim.models import MIB
from servescope_sim.scenarios import EngineLoad

from .hardware import Hardware

MINUTE = 60.0
GIB = 1024 * MIB
# A dense ~70B-class model on one GPU: a step takes at least 45 ms. The simulator's default
# DeepSeek-class step model runs three to four times more steps per simulated second, which the
# benchmark's time budget cannot afford; KV holds 262,144 tokens, so a few dozen long requests fill it.
ENGINE = EngineConfig(num_gpu_blocks=16_384, cost=StepCost(base=0.045, experts=0.015))
REQUESTS_AT_FULL_LOAD = 2.0  # each engine's Poisson arrivals at GPU load 1.0 (1 req/s at 0.5)
CHAT_PROMPT, CHAT_OUTPUT = 512, 64  # tokens: short chat turns keep the simulated batch (and its cost) small
KV_PROMPT, KV_OUTPUT = 4096, 1024


# --- what happens -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Curve:
    """Noise-free target load of every GPU: piecewise linear through `points`, plus a slow wave."""

    points: tuple[tuple[float, float], ...]
    wave_amplitude: float = 0.0
    wave_period: float = 0.0

    def at(self, t: float) -> float:
        value = self._linear(t)
        if self.wave_amplitude and self.wave_period:
            # Starts at the trough: a day that begins quiet, peaks half a period later.
            value -= self.wave_amplitude * math.cos(2 * math.pi * t / self.wave_period)
        return min(1.0, max(0.0, value))

    def _linear(self, t: float) -> float:
        points = self.points
        if t <= points[0][0]:
            return points[0][1]
        for (t0, v0), (t1, v1) in itertools.pairwise(points):
            if t <= t1:
                return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1
        return points[-1][1]


def flat(load: float) -> Curve:
    return Curve(((0.0, load),))


def steps(base: float, bursts: tuple[tuple[float, float, float], ...], edge: float = 20.0) -> Curve:
    """`base`, with (start, seconds, load) bursts whose edges take `edge` seconds."""
    points = [(0.0, base)]
    for start, seconds, load in bursts:
        points += [
            (start, base),
            (start + edge, load),
            (start + seconds - edge, load),
            (start + seconds, base),
        ]
    return Curve(tuple(points))


@dataclass(frozen=True)
class KvClients:
    """Closed-loop clients of long requests on one engine: `start` -> `end` clients over `ramp` seconds."""

    start: int
    end: int
    ramp: float

    def load(self, since: float) -> EngineLoad:
        progress = min(1.0, max(0.0, since / self.ramp))
        clients = round(self.start + (self.end - self.start) * progress)
        return EngineLoad(
            arrival_rate=0.0, concurrency=clients, prompt_tokens=KV_PROMPT, output_tokens=KV_OUTPUT
        )


@dataclass
class PlanScenario(FaultPlan):
    """The production `FaultPlan` (its faults, windows and XID) over a plan's load curve and engines."""

    name: ClassVar[str] = "benchmark-plan"
    curve: Curve = field(default_factory=lambda: flat(0.5))
    kv_clients: KvClients | None = None
    workspace_bytes: float | None = None

    def gpu_load(self, t: float) -> float:
        return self.curve.at(t)

    def engine_loads(self, t: float, engines: int) -> list[EngineLoad]:
        # Arrivals follow the load (quantised to 0.1 req/s so that engines are told only of changes).
        rate = round(REQUESTS_AT_FULL_LOAD * self.curve.at(t), 1)
        steady = EngineLoad(arrival_rate=rate, prompt_tokens=CHAT_PROMPT, output_tokens=CHAT_OUTPUT)
        loads = [steady] * engines
        kv = self.kv
        if kv is not None and self.kv_clients is not None and kv.window.active(t) and kv.engine < engines:
            loads[kv.engine] = self.kv_clients.load(t - kv.window.start)
        down = self.down
        if down is not None and down.window.active(t) and down.engine < engines:
            loads[down.engine] = EngineLoad(arrival_rate=steady.arrival_rate, down=True)
        return loads

    def apply(self, fleet: SimulatedFleet, t: float) -> None:
        with fleet.lock:
            super().apply(fleet, t)
            if self.workspace_bytes is not None:
                fleet.set_memory_profile(None, workspace_bytes=self.workspace_bytes)


# --- what should be heard -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Busy:
    """Noise-free busyness of `gpu` (None: the mean over the node's GPUs) above `threshold` for `min_s`."""

    threshold: float
    min_s: float
    gpu: int | None = None


@dataclass(frozen=True)
class KvAbove:
    """The engine's KV usage (1-minute mean) above `threshold` for at least `min_s`."""

    engine: int
    threshold: float
    min_s: float


@dataclass(frozen=True)
class Both:
    """Both conditions at once, for at least `min_s`."""

    first: Condition
    second: Condition
    min_s: float


@dataclass(frozen=True)
class LeakToOom:
    """From the leak's start to the OOM the simulator recorded on `gpu` (the scenario's end if none)."""

    gpu: int
    start: float


@dataclass(frozen=True)
class AfterDeath:
    """From the moment engine `engine` died (OOM, lost GPU) to the scenario's end."""

    engine: int


@dataclass(frozen=True)
class SloBreach:
    """More than `share` of the requests of all engines took over `bound` s ("ttft" or "e2e") in the
    trailing `window_s`, by the engines' own histograms (`bound` must be one of their bucket bounds)."""

    sli: str
    bound: float
    window_s: float
    share: float


@dataclass(frozen=True)
class SloBurn:
    """A model's SLO burning at a paging rate, the page's own definition applied to the truth: more than
    14.4x the budget over both 1 h and 5 min, or 6x over both 6 h and 30 min (`scale` x those rates).
    `sli`: "ttft" or "e2e", from the engines' histograms at the bound; "availability": the share of the
    engines that served and are now down, dead or in a `hung` window (engine index, window)."""

    sli: str
    bound: float = 0.0
    scale: float = 1.0
    hung: tuple[tuple[int, Window], ...] = ()


# A fixed window of simulated seconds (`end` may be inf: until the scenario ends): a fault's own window.
During = Window
Condition = Window | Busy | KvAbove | Both | LeakToOom | AfterDeath | SloBreach | SloBurn


@dataclass(frozen=True)
class Incident:
    """Something an operator must hear about: `expect` must fire, `accept` may (correct symptoms)."""

    name: str
    when: Condition
    expect: tuple[str, ...]
    accept: tuple[str, ...] = ()
    gpu: int | None = None  # the GPU its page must name (label gpu); None: not matched on
    engine: int | None = None  # the engine its page must name (label endpoint); None: not matched on
    # Alerts over 10-minute increases and `for` clauses can start a little after the fault healed.
    grace_s: float = 15 * MINUTE
    lead_s: float = 0.0  # an alert over rates may cross its threshold this long before the truth does


@dataclass(frozen=True)
class Plan:
    """One scenario of the bench: the simulated node, what happens to it, whom a perfect tool pages."""

    name: str
    description: str
    duration: float  # simulated seconds
    scenario: PlanScenario
    incidents: tuple[Incident, ...] = ()
    gpu_model: str = "H100"
    layout: tuple[tuple[int, ...], ...] = ((0,), (1,))
    nvlinks: int | None = 2  # H100s have 18; two are enough to carry a CRC storm and cost less to read
    slow: bool = False  # left out of --quick
    # Prometheus cannot reach the exporter (its node keeps running): scrapes record only up == 0.
    unreachable: Window | None = None

    @property
    def gpus(self) -> int:
        return max(i for group in self.layout for i in group) + 1

    @property
    def xid_events(self) -> bool:
        return self.scenario.lost is not None

    @property
    def hardware(self) -> Hardware:
        return Hardware(self.gpus, self.gpu_model, self.layout, self.nvlinks, self.xid_events)

    def fresh_scenario(self) -> PlanScenario:
        """A copy with nothing emitted yet: a scenario remembers the XIDs it sent."""
        return replace(self.scenario, emitted=set())
