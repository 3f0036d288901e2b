"""Faults on steady serving, one at a time (nvlink-crc, gpu-lost, vllm-down) or all in turn (tour).

Every fault is a `FaultPlan`: steady load on every GPU and engine, plus timed faults on chosen targets.
The plan is a pure function of simulated time like every scenario, except that an XID is an event: it
is emitted once, the first time its second is applied.

Single faults start at the pace's `fault_start_seconds` (20 s real, 60 s demo).

nvlink-crc
    From the start, NVLink 0 of GPU 1 counts 5 CRC flit errors a second (and a quarter as many data CRC
    errors): a marginal link or cable. The other links and GPUs stay clean.
gpu-lost
    GPU 2 reports XID 79 and falls off the bus: NVML answers GpuIsLost for it from then on.
vllm-down
    Engine 1 (engine 0 when there is one) answers 503 on every route: its engine core died
    while its API server still listens. Its GPUs go idle, their memory stays held.
tour
    Steady for a quarter of a phase, then kv-pressure on engine 0, a CRC storm on the first GPU of
    engine 1, engine 2 down (each for one phase and then healed), a leak on the first GPU of engine 3 for
    two and a half phases (it ends in OOM at the demo pace), and finally the last GPU is lost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from servescope_sim.fleet import SimulatedFleet
from servescope_sim.models import MIB
from servescope_sim.scenarios import STEADY_ENGINE, EngineLoad, Pace, Scenario, kv_pressure_load

CRC_ERRORS_PER_SECOND = 5.0
CRC_LINK = 0
LOST_XID = 79
SATURATED_LOAD = 0.95


@dataclass(frozen=True)
class Window:
    """Simulated seconds [start, end) a fault is on."""

    start: float
    end: float = math.inf

    def active(self, t: float) -> bool:
        return self.start <= t < self.end


@dataclass(frozen=True)
class EngineFault:
    """A fault on one engine and the GPUs it serves from."""

    engine: int
    gpus: tuple[int, ...]
    window: Window


@dataclass(frozen=True)
class GpuFault:
    gpu: int
    window: Window


@dataclass
class FaultPlan(Scenario):
    """Steady serving (load 0.6, 4 req/s per engine) with the faults that are set."""

    name: ClassVar[str] = "fault-plan"
    description: ClassVar[str] = "steady serving with timed faults"
    kv: EngineFault | None = None
    crc: GpuFault | None = None
    down: EngineFault | None = None
    leak: GpuFault | None = None
    leak_bytes_per_second: float = 0.0
    lost: GpuFault | None = None
    kv_ramp_seconds: float = 1800.0
    emitted: set[int] = field(default_factory=set)

    def gpu_load(self, t: float) -> float:
        return 0.6

    def engine_load(self, t: float) -> EngineLoad:
        return self.engine_loads(t, 1)[0]

    def engine_loads(self, t: float, engines: int) -> list[EngineLoad]:
        loads = [STEADY_ENGINE] * engines
        if self.kv is not None and self.kv.window.active(t) and self.kv.engine < engines:
            loads[self.kv.engine] = kv_pressure_load(t - self.kv.window.start, self.kv_ramp_seconds)
        if self.down is not None and self.down.window.active(t) and self.down.engine < engines:
            loads[self.down.engine] = EngineLoad(arrival_rate=STEADY_ENGINE.arrival_rate, down=True)
        return loads

    def apply(self, fleet: SimulatedFleet, t: float) -> None:
        count = len(fleet.gpus)
        with fleet.lock:
            super().apply(fleet, t)
            if self.kv is not None and self.kv.window.active(t):
                for index in (i for i in self.kv.gpus if i < count):
                    fleet.set_load(index, SATURATED_LOAD)
            if self.down is not None and self.down.window.active(t):
                # A dead engine core leaves its GPUs idle; the process still holds their memory.
                for index in (i for i in self.down.gpus if i < count):
                    fleet.set_load(index, 0.0)
            if self.crc is not None and self.crc.gpu < count:
                rate = CRC_ERRORS_PER_SECOND if self.crc.window.active(t) else 0.0
                fleet.nvlink_crc_burst(self.crc.gpu, CRC_LINK, rate)
            if self.leak is not None and self.leak.gpu < count:
                rate = self.leak_bytes_per_second if self.leak.window.active(t) else 0.0
                fleet.start_leak(self.leak.gpu, rate)
            lost = self.lost
            if (
                lost is not None
                and lost.gpu < count
                and lost.window.active(t)
                and lost.gpu not in self.emitted
            ):
                self.emitted.add(lost.gpu)
                fleet.emit_xid(lost.gpu, LOST_XID)
                fleet.lose_gpu(lost.gpu)

    def timeline(self) -> list[tuple[float, str]]:
        """(second, what happens), in order, a fault's end before the next one's start: what a demo
        prints so people know what to look for and when."""
        events: list[tuple[float, int, str]] = []

        def add(window: Window, starts: str, ends: str) -> None:
            events.append((window.start, 1, starts))
            if window.end < math.inf:
                events.append((window.end, 0, ends))

        if self.kv is not None:
            what = f"KV-cache pressure on engine {self.kv.engine} (GPUs {_gpus(self.kv)})"
            add(self.kv.window, what, f"{what} ends")
        if self.crc is not None:
            what = f"NVLink CRC error storm on GPU {self.crc.gpu}"
            add(self.crc.window, what, f"{what} ends")
        if self.down is not None:
            engine = f"engine {self.down.engine}"
            add(self.down.window, f"{engine} down (503), GPUs {_gpus(self.down)} idle", f"{engine} back up")
        if self.leak is not None:
            rate = self.leak_bytes_per_second * 60 / MIB
            add(self.leak.window, f"GPU {self.leak.gpu} leaks {rate:.0f} MiB/min until OOM", "")
        if self.lost is not None:
            add(self.lost.window, f"GPU {self.lost.gpu} falls off the bus (XID 79)", "")
        return [(t, what) for t, _, what in sorted(events)]


def _gpus(fault: EngineFault) -> str:
    return ",".join(str(i) for i in fault.gpus) or "none"


class NvlinkCrc(FaultPlan):
    name: ClassVar[str] = "nvlink-crc"
    description: ClassVar[str] = "steady; from 20 s NVLink 0 of GPU 1 counts CRC errors (5/s)"


class GpuLost(FaultPlan):
    name: ClassVar[str] = "gpu-lost"
    description: ClassVar[str] = "steady; at 20 s GPU 2 reports XID 79 and falls off the bus"


class VllmDown(FaultPlan):
    name: ClassVar[str] = "vllm-down"
    description: ClassVar[str] = "steady; from 20 s engine 1 answers 503 (engine core dead), its GPUs idle"


class Tour(FaultPlan):
    name: ClassVar[str] = "tour"
    description: ClassVar[str] = (
        "every fault in turn: KV pressure, NVLink CRC storm, an engine down, a leak to OOM, a GPU lost"
    )


def _group(layout: list[list[int]], engine: int) -> tuple[int, ...]:
    return tuple(layout[engine]) if engine < len(layout) else ()


def nvlink_crc(pace: Pace) -> NvlinkCrc:
    return NvlinkCrc(crc=GpuFault(1, Window(pace.fault_start_seconds)))


def gpu_lost(pace: Pace) -> GpuLost:
    return GpuLost(lost=GpuFault(2, Window(pace.fault_start_seconds)))


def vllm_down(pace: Pace, layout: list[list[int]]) -> VllmDown:
    """Engine 1 down (engine 0 on a one-engine node), its GPUs idle."""
    engine = 1 if len(layout) > 1 else 0
    return VllmDown(down=EngineFault(engine, _group(layout, engine), Window(pace.fault_start_seconds)))


def tour(pace: Pace, layout: list[list[int]], leak_mib_per_minute: float) -> Tour:
    """Every fault in turn, one phase each, on the engines laid out on GPUs as `layout` says."""
    engines = len(layout)
    phase = pace.phase_seconds
    t0 = phase / 4
    gpus = [g for group in layout for g in group] or [0, 1, 2, 3]

    def window(k: int) -> Window:
        return Window(t0 + k * phase, t0 + (k + 1) * phase)

    def first_gpu(engine: int, fallback: int) -> int:
        group = _group(layout, engine % engines) if engines else ()
        return group[0] if group else fallback

    leak_start = t0 + 3 * phase
    return Tour(
        kv=EngineFault(0, _group(layout, 0), window(0)),
        crc=GpuFault(first_gpu(1, 1), window(1)),
        down=EngineFault(2 % max(engines, 1), _group(layout, 2 % max(engines, 1)), window(2)),
        leak=GpuFault(first_gpu(3, 0), Window(leak_start)),
        leak_bytes_per_second=leak_mib_per_minute * MIB / 60.0,
        lost=GpuFault(gpus[-1], Window(leak_start + 2.5 * phase)),
        kv_ramp_seconds=pace.kv_ramp_seconds,
    )
