"""The scenario library: what happens on a node and when, and the incidents an operator should hear about.

A `Plan` is data: the node's layout, the GPUs' noise-free load over time, the faults (the production
simulator's `FaultPlan` windows: KV pressure, NVLink CRC storm, engine down, leak, GPU lost) and the
ground-truth incidents, each naming the alerts that must fire for it (`expect`, counted in recall) and
the alerts that are correct symptoms of it (`accept`: true when they fire, not required). An alert that
fires outside every incident listing it is a false positive.

Incident windows are conditions on the simulation's ground truth (see `truth.py`), so they follow what
really happened: a saturation incident is the time the GPU's noise-free load stayed above the
configured ratio for at least the alert's `for` (the operators' "over 85 % sustained"), a leak incident
runs from the leak's start to the OOM the simulator records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from servescope.alerts.config import AlertsConfig
from servescope.alerts.lint import duration_seconds
from servescope.sim.fault_scenarios import EngineFault, FaultPlan, GpuFault, Window
from servescope.sim.fleet import SimulatedFleet
from servescope.sim.models import MIB
from servescope.sim.scenarios import EngineLoad
from servescope.sim.vllm_engine import EngineConfig, StepCost

MINUTE = 60.0
GIB = 1024 * MIB
# A dense ~70B-class model on one GPU: a step takes at least 45 ms. The simulator's default
# DeepSeek-class step model runs three to four times more steps per simulated second, which the
# benchmark's time budget cannot afford; KV holds 262,144 tokens, so a few dozen long requests fill it.
ENGINE = EngineConfig(num_gpu_blocks=16_384, cost=StepCost(base=0.045, experts=0.015))
REQUESTS_AT_FULL_LOAD = 4.0  # each engine's Poisson arrivals at GPU load 1.0 (2 req/s at 0.5)
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
        for (t0, v0), (t1, v1) in zip(points, points[1:], strict=False):
            if t <= t1:
                return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1
        return points[-1][1]


def flat(load: float) -> Curve:
    return Curve(((0.0, load),))


def steps(base: float, bursts: tuple[tuple[float, float, float], ...], edge: float = 20.0) -> Curve:
    """`base`, with (start, seconds, load) bursts whose edges take `edge` seconds."""
    points = [(0.0, base)]
    for start, seconds, load in bursts:
        points += [(start, base), (start + edge, load), (start + seconds - edge, load), (start + seconds, base)]
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
        steady = EngineLoad(arrival_rate=round(REQUESTS_AT_FULL_LOAD * self.curve.at(t), 1))
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
class During:
    """A fixed window of simulated seconds (`end` may be inf: until the scenario ends)."""

    start: float
    end: float = math.inf


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


Condition = During | Busy | KvAbove | Both | LeakToOom | AfterDeath


@dataclass(frozen=True)
class Incident:
    """Something an operator must hear about: `expect` must fire, `accept` may (correct symptoms)."""

    name: str
    when: Condition
    expect: tuple[str, ...]
    accept: tuple[str, ...] = ()
    gpu: int | None = None
    engine: int | None = None
    # Alerts over 10-minute increases and `for` clauses can start a little after the fault healed.
    grace_s: float = 15 * MINUTE


@dataclass(frozen=True)
class Plan:
    name: str
    description: str
    duration: float
    scenario: PlanScenario
    incidents: tuple[Incident, ...] = ()
    gpu_model: str = "H100"
    layout: tuple[tuple[int, ...], ...] = ((0,), (1,))
    nvlinks: int | None = 2  # H100s have 18; two are enough to carry a CRC storm and cost less to read
    slow: bool = False  # left out of --quick

    @property
    def gpus(self) -> int:
        return max(i for group in self.layout for i in group) + 1

    @property
    def xid_events(self) -> bool:
        return self.scenario.lost is not None

    def fresh_scenario(self) -> PlanScenario:
        """A copy with nothing emitted yet: a scenario remembers the XIDs it sent."""
        s = self.scenario
        return PlanScenario(
            kv=s.kv,
            crc=s.crc,
            down=s.down,
            leak=s.leak,
            leak_bytes_per_second=s.leak_bytes_per_second,
            lost=s.lost,
            curve=s.curve,
            kv_clients=s.kv_clients,
            workspace_bytes=s.workspace_bytes,
        )


# --- the library --------------------------------------------------------------------------------------

SERVING_SYMPTOMS = (
    "ServescopeTtftSloBurnFast",
    "ServescopeTtftSloBurnSlow",
    "ServescopeE2eSloBurnFast",
    "ServescopeE2eSloBurnSlow",
    "ServescopeTtftP99High",
    "ServescopeRequestQueueBuilding",
    "ServescopePreemptionsSustained",
)


def _saturation(cfg: AlertsConfig, gpu: int, name: str = "GPU saturated") -> Incident:
    return Incident(
        name,
        Busy(cfg.gpu_saturated_ratio, duration_seconds(cfg.gpu_saturated_for), gpu),
        expect=("ServescopeGpuSaturated",),
        gpu=gpu,
    )


def _fleet_busy(cfg: AlertsConfig) -> Incident:
    return Incident(
        "fleet without spare capacity",
        Busy(1 - cfg.capacity_buffer_ratio, duration_seconds(cfg.capacity_for)),
        expect=("ServescopeFleetCapacityBufferLow",),
    )


def steady_diurnal(cfg: AlertsConfig) -> Plan:
    # A compressed day: quiet at 0.3, busy at 0.75, noise from the fleet, memory following the load.
    curve = Curve(((0.0, 0.525),), wave_amplitude=0.225, wave_period=120 * MINUTE)
    return Plan(
        "steady-diurnal",
        "a day's load compressed into 2 h (0.30 -> 0.75 -> 0.30) with noise; nothing is wrong",
        120 * MINUTE,
        PlanScenario(curve=curve),
    )


def traffic_ramp(cfg: AlertsConfig) -> Plan:
    curve = Curve(((0.0, 0.3), (10 * MINUTE, 0.3), (55 * MINUTE, 0.97)))
    return Plan(
        "traffic-ramp",
        "load 0.30 -> 0.97 over 45 min, then held: memory grows with traffic (no leak), the GPUs saturate",
        90 * MINUTE,
        PlanScenario(curve=curve),
        (_saturation(cfg, 0), _saturation(cfg, 1), _fleet_busy(cfg)),
    )


def bursts(cfg: AlertsConfig) -> Plan:
    # Bursts of 3, 6 and 9 minutes stay under the 10-minute `for`; the 20-minute one is an incident.
    shape = ((10 * MINUTE, 3 * MINUTE, 0.97), (25 * MINUTE, 6 * MINUTE, 0.97))
    shape += ((42 * MINUTE, 9 * MINUTE, 0.97), (62 * MINUTE, 20 * MINUTE, 0.97))
    return Plan(
        "bursts",
        "load 0.5 with bursts to 0.97 of 3, 6 and 9 min (no incident) and one of 20 min (saturation)",
        95 * MINUTE,
        PlanScenario(curve=steps(0.5, shape)),
        (_saturation(cfg, 0), _saturation(cfg, 1), _fleet_busy(cfg)),
    )


LEAK_START = 10 * MINUTE


def leak(cfg: AlertsConfig, mib_per_minute: float, duration: float, *, slow: bool = False) -> Plan:
    # An L40S with a small activation workspace leaves ~4.4 GiB of headroom under vLLM's 0.9 budget,
    # so a 40 MiB/min leak reaches OOM in under two hours (an H200 would take six).
    scenario = PlanScenario(
        curve=flat(0.6),
        leak=GpuFault(0, Window(LEAK_START)),
        leak_bytes_per_second=mib_per_minute * MIB / 60,
        workspace_bytes=1 * GIB,
    )
    leak_incident = Incident(
        f"GPU 0 leaks {mib_per_minute:g} MiB/min until OOM",
        LeakToOom(0, LEAK_START),
        expect=(
            "ServescopeGpuMemoryLeakSuspected",
            "ServescopeGpuMemoryExhaustionSoon",
            "ServescopeEngineOverMemoryBudget",
        ),
        accept=("ServescopeGpuMemoryHeadroomLow",),
        gpu=0,
        grace_s=0.0,  # after the OOM the memory is gone: nothing can newly fire about the leak
    )
    crash = Incident(
        "engine 0 died of OOM", AfterDeath(0), expect=("ServescopeServingEndpointDown",), engine=0
    )
    return Plan(
        f"leak-{mib_per_minute:g}",
        f"load 0.6; from 10 min GPU 0 (L40S) leaks {mib_per_minute:g} MiB/min until its engine dies of OOM",
        duration,
        scenario,
        (leak_incident, crash),
        gpu_model="L40S",
        nvlinks=None,
        slow=slow,
    )


def kv_pressure(cfg: AlertsConfig, *, saturate: bool) -> Plan:
    window = Window(10 * MINUTE, 50 * MINUTE)
    scenario = PlanScenario(
        curve=flat(0.5),
        kv=EngineFault(0, (0,) if saturate else (), window),
        kv_clients=KvClients(4, 52, 20 * MINUTE),
    )
    kv_for = duration_seconds(cfg.kv_pressure_for)
    pressure = KvAbove(0, cfg.kv_pressure_ratio, kv_for)
    incidents = [
        Incident(
            "engine 0 KV cache under pressure",
            pressure,
            expect=("ServescopeKvCachePressure",),
            accept=SERVING_SYMPTOMS,
            engine=0,
        )
    ]
    if saturate:
        busy = Busy(cfg.gpu_saturated_ratio, 0.0, 0)
        incidents += [
            Incident(
                "engine 0 KV pressure on a saturated GPU 0",
                Both(pressure, busy, duration_seconds(cfg.combined_for)),
                expect=("ServescopeGpuSaturatedKvPressure",),
                engine=0,
                gpu=0,
            ),
            _saturation(cfg, 0),
        ]
    what = "while its GPU 0 runs at 0.95" if saturate else "while its GPU stays at 0.5"
    return Plan(
        "kv-pressure-saturated" if saturate else "kv-pressure",
        f"load 0.5; 10-50 min: 4 -> 52 clients of 4096/1024-token requests fill engine 0's KV cache {what}",
        65 * MINUTE,
        scenario,
        tuple(incidents),
    )


def nvlink_crc(cfg: AlertsConfig) -> Plan:
    window = Window(15 * MINUTE, 40 * MINUTE)
    return Plan(
        "nvlink-crc",
        "load 0.5; 15-40 min NVLink 0 of GPU 1 counts 5 CRC flit errors/s",
        60 * MINUTE,
        PlanScenario(curve=flat(0.5), crc=GpuFault(1, window)),
        (
            Incident(
                "NVLink CRC storm on GPU 1",
                During(window.start, window.end),
                expect=("ServescopeNvlinkCrcErrors",),
                # The simulator counts a replay for every fourth CRC error, as a link retrying bad flits does.
                accept=("ServescopeNvlinkReplayRecovery",),
                gpu=1,
            ),
        ),
    )


def gpu_lost(cfg: AlertsConfig) -> Plan:
    start = 10 * MINUTE
    return Plan(
        "gpu-lost",
        "load 0.5; at 10 min GPU 1 reports XID 79 and falls off the bus, killing engine 1",
        35 * MINUTE,
        PlanScenario(curve=flat(0.5), lost=GpuFault(1, Window(start))),
        (
            Incident(
                "GPU 1 lost (XID 79)",
                During(start),
                expect=("ServescopeGpuLost", "ServescopeGpuXidCritical"),
                gpu=1,
            ),
            Incident(
                "engine 1 died with its GPU",
                AfterDeath(1),
                expect=("ServescopeServingEndpointDown",),
                engine=1,
            ),
        ),
    )


def vllm_down(cfg: AlertsConfig) -> Plan:
    window = Window(10 * MINUTE, 30 * MINUTE)
    return Plan(
        "vllm-down",
        "load 0.5; 10-30 min engine 1 answers 503 (engine core dead), its GPU idle; then it restarts",
        45 * MINUTE,
        PlanScenario(curve=flat(0.5), down=EngineFault(1, (1,), window)),
        (
            Incident(
                "engine 1 down",
                During(window.start, window.end),
                expect=("ServescopeServingEndpointDown",),
                engine=1,
                grace_s=0.0,
            ),
        ),
    )


def library(cfg: AlertsConfig | None = None) -> list[Plan]:
    """Every scenario of the benchmark, with its incidents built from the alert configuration."""
    cfg = cfg or AlertsConfig()
    return [
        steady_diurnal(cfg),
        traffic_ramp(cfg),
        bursts(cfg),
        leak(cfg, 20, 250 * MINUTE, slow=True),
        leak(cfg, 40, 135 * MINUTE),
        leak(cfg, 120, 60 * MINUTE),
        kv_pressure(cfg, saturate=True),
        kv_pressure(cfg, saturate=False),
        nvlink_crc(cfg),
        gpu_lost(cfg),
        vllm_down(cfg),
    ]
