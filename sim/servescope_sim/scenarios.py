"""Named scenarios: what a simulated node does over simulated time, for demos and detector tests.

A scenario drives a `SimulatedFleet` (GPU load, memory profile, leaks) through `apply(fleet, t)` and
says through `engine_load(t)` what each simulated vLLM engine should be running. Both are pure
functions of the simulated elapsed time `t`, so calling them every second, or twice a second, or after
a pause gives the same node. Each exists to test one judgement a detector makes:

steady
    Flat load 0.6; memory carries a workspace, an allocator sawtooth (128 MiB over 45 s) and 8 MiB of
    noise, but no trend. Engines run 4 req/s Poisson of 512/128 tokens. A detector must flag nothing:
    the sawtooth and the noise are the traps an ordinary least-squares slope falls into.
memory-leak
    Steady, plus one GPU leaking `leak_mib_per_minute` (40 by default) until its engine dies of OOM.
    A detector must flag that GPU, with a time to exhaustion near the fleet's
    `true_seconds_to_exhaustion`, and must not flag the other GPUs.
traffic-ramp
    Load rises linearly from 0.2 to 1.0 over `ramp_seconds` and holds; memory rises with it through
    the workspace (6 GiB at full load) and engines' arrivals rise from 1 to 8 req/s. Memory grows,
    but it follows traffic: a detector must NOT call it a leak (it should see load explain the growth).
kv-pressure
    Long requests (4096/1024 tokens) from closed-loop clients whose number grows from 8 to 240 over 30
    minutes, so one engine's KV-cache usage climbs to ~0.95 while its GPUs run at 0.95 (every GPU at 0.9
    when the scenario is not told which GPUs the engine holds). Device memory stays flat, because vLLM
    preallocates its KV pool: a detector must flag KV saturation from the engine's metrics, on that
    engine and its GPUs only, and must NOT call device memory a leak.
nvlink-crc, gpu-lost, vllm-down, tour
    One fault on steady serving, from 20 s (60 s at the demo pace): a CRC error storm on one NVLink,
    a GPU falling off the bus (XID 79), an engine that answers 503; and all the faults one after
    another (fault_scenarios.py).

The `demo` pace (see `Pace`) compresses the slow ones so that a demo or an end-to-end test sees alerts
within minutes: the KV ramp takes 90 s instead of 30 min, the leak grows 2 GiB/min instead of 40 MiB,
and the single faults wait a minute for a baseline.

The memory workspace (activations at full load) is 6 GiB, or a tenth of a smaller GPU. It lies inside
vLLM's gpu_memory_utilization budget (the KV pool is sized from what it leaves), so traffic alone never
kills an engine and only the memory-leak scenario ends in OOM.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from servescope_sim.fleet import SimulatedFleet
from servescope_sim.models import MIB
from servescope_sim.sim_gpu import SimGpu

GIB = 1024 * MIB
WORKSPACE_BYTES = 6 * GIB
WORKSPACE_MAX_FRACTION = 0.1
SAWTOOTH_BYTES = 128 * MIB
SAWTOOTH_PERIOD_S = 45.0
NOISE_BYTES = 8 * MIB


@dataclass(frozen=True)
class Pace:
    """How fast the slow scenarios unfold. `real` is what detectors are tested against; `demo` makes
    faults visible within minutes and is what `servescope demo` plays."""

    name: str
    kv_ramp_seconds: float
    leak_mib_per_minute: float
    # Tour: how long each fault lasts before the next one starts.
    phase_seconds: float
    # nvlink-crc, gpu-lost, vllm-down: when the fault starts.
    fault_start_seconds: float
    # canary: when an engine becomes the new revision.
    canary_start_seconds: float = 240.0


PACES = {
    "real": Pace("real", 1800.0, 40.0, phase_seconds=1800.0, fault_start_seconds=20.0),
    # 2 GiB/min fills an H200's ~16 GiB of headroom in about 8.4 min: the leak verdict needs 4 min of
    # history, so an alert still comes minutes before the OOM. Faults start after a minute, so that
    # Prometheus holds a healthy baseline (and the engines' GPU join) before them.
    "demo": Pace("demo", 90.0, 2048.0, phase_seconds=240.0, fault_start_seconds=60.0),
}


@dataclass(frozen=True)
class EngineLoad:
    """What a simulated engine runs: the arguments of `SimulatedEngine.set_load`.

    Values are quantised (rates to 0.1 req/s, whole clients) so that a driver can call `set_load`
    only when the load changes: each call redraws the next Poisson arrival, so calling it on every
    tick would tie the engine's random stream to the tick rate.
    """

    arrival_rate: float
    concurrency: int = 0
    prompt_tokens: int = 512
    output_tokens: int = 128
    down: bool = False  # the engine answers 503 (its engine core died; the API server still listens)
    prefill_factor: float = 1.0  # its build's prefill is this many times slower (the canary scenario)


STEADY_ENGINE = EngineLoad(arrival_rate=4.0)


def workspace_for(gpu: SimGpu) -> float:
    """6 GiB, or a tenth of a small GPU: activations take a share of the budget, not all of it."""
    return float(min(WORKSPACE_BYTES, gpu.model.memory_bytes * WORKSPACE_MAX_FRACTION))


class Scenario(ABC):
    """A named load pattern over simulated time; `apply` and `engine_load` depend only on `t`."""

    name: ClassVar[str]
    description: ClassVar[str]
    # The node's Kubernetes side (cluster.py: a kubelet socket and an API server) plays a part.
    needs_cluster: ClassVar[bool] = False

    @abstractmethod
    def gpu_load(self, t: float) -> float:
        """Target load (0-1) of every GPU at simulated second `t`; the fleet adds its own noise."""

    @abstractmethod
    def engine_load(self, t: float) -> EngineLoad:
        """What each simulated engine should be running at simulated second `t`."""

    def engine_loads(self, t: float, engines: int) -> list[EngineLoad]:
        """What each of `engines` engines runs at `t`; the same for all unless a scenario targets one."""
        return [self.engine_load(t)] * engines

    def revisions(self, t: float, engines: int) -> list[str]:
        """The rollout revision each engine's pod runs at `t`; empty: they stay as they are."""
        return []

    def timeline(self) -> list[tuple[float, str]]:
        """(second, what happens), in order, for a demo to print; empty: the description says it all."""
        return []

    def apply(self, fleet: SimulatedFleet, t: float) -> None:
        """Set the fleet's loads and memory profiles for simulated second `t` (idempotent)."""
        load = self.gpu_load(t)
        with fleet.lock:
            for gpu in fleet.gpus:
                fleet.set_load(gpu.index, load)
                fleet.set_memory_profile(
                    gpu.index,
                    workspace_bytes=workspace_for(gpu),
                    sawtooth_bytes=SAWTOOTH_BYTES,
                    sawtooth_period_s=SAWTOOTH_PERIOD_S,
                    noise_bytes=NOISE_BYTES,
                )


@dataclass(frozen=True)
class Steady(Scenario):
    name: ClassVar[str] = "steady"
    description: ClassVar[str] = "flat load 0.6, memory with sawtooth and noise but no trend"

    def gpu_load(self, t: float) -> float:
        return 0.6

    def engine_load(self, t: float) -> EngineLoad:
        return STEADY_ENGINE


@dataclass(frozen=True)
class MemoryLeak(Steady):
    name: ClassVar[str] = "memory-leak"
    description: ClassVar[str] = "steady, plus one GPU leaking device memory until its engine dies of OOM"
    gpu: int = 0
    leak_mib_per_minute: float = 40.0

    def apply(self, fleet: SimulatedFleet, t: float) -> None:
        if not 0 <= self.gpu < len(fleet.gpus):
            raise ValueError(f"memory-leak on GPU {self.gpu}, but the fleet has {len(fleet.gpus)} GPUs")
        with fleet.lock:
            super().apply(fleet, t)
            # Setting the same rate again is a no-op; after the OOM the dead engine holds nothing to leak.
            fleet.start_leak(self.gpu, self.leak_mib_per_minute * MIB / 60.0)


@dataclass(frozen=True)
class TrafficRamp(Scenario):
    name: ClassVar[str] = "traffic-ramp"
    description: ClassVar[str] = "load 0.2 -> 1.0 over the ramp; memory follows traffic, not a leak"
    ramp_seconds: float = 3600.0

    def progress(self, t: float) -> float:
        return min(1.0, max(0.0, t / self.ramp_seconds))

    def gpu_load(self, t: float) -> float:
        return 0.2 + 0.8 * self.progress(t)

    def engine_load(self, t: float) -> EngineLoad:
        return EngineLoad(arrival_rate=round(1.0 + 7.0 * self.progress(t), 1))


# Checked against SimulatedEngine's defaults (65,536 blocks of 16 tokens, max_num_seqs 256): 240 clients
# of 4096/1024-token requests hold ~0.95 of the KV cache; 256 would saturate it and start preempting.
KV_CLIENTS_START = 8
KV_CLIENTS_END = 240
KV_RAMP_SECONDS = 1800.0


def kv_pressure_load(t: float, ramp_seconds: float) -> EngineLoad:
    """Long requests from closed-loop clients growing from 8 to 240 over `ramp_seconds`."""
    progress = min(1.0, max(0.0, t / ramp_seconds))
    clients = round(KV_CLIENTS_START + (KV_CLIENTS_END - KV_CLIENTS_START) * progress)
    # Closed loop only: the client count, not an arrival rate, sets how much KV is held.
    return EngineLoad(arrival_rate=0.0, concurrency=clients, prompt_tokens=4096, output_tokens=1024)


@dataclass(frozen=True)
class KvPressure(Scenario):
    name: ClassVar[str] = "kv-pressure"
    description: ClassVar[str] = "long requests, rising concurrency: KV cache climbs toward saturation"
    engine: int = 0
    # The GPUs `engine` serves from; None when unknown: then every GPU is busy (0.9), as every engine.
    gpus: tuple[int, ...] | None = None
    ramp_seconds: float = KV_RAMP_SECONDS

    def gpu_load(self, t: float) -> float:
        return 0.9 if self.gpus is None else 0.6

    def apply(self, fleet: SimulatedFleet, t: float) -> None:
        with fleet.lock:
            super().apply(fleet, t)
            for index in self.gpus or ():
                if index < len(fleet.gpus):
                    fleet.set_load(index, 0.95)

    def engine_load(self, t: float) -> EngineLoad:
        return kv_pressure_load(t, self.ramp_seconds)

    def engine_loads(self, t: float, engines: int) -> list[EngineLoad]:
        if self.gpus is None:
            return [self.engine_load(t)] * engines
        return [self.engine_load(t) if i == self.engine else STEADY_ENGINE for i in range(engines)]


FAULTS_START_SECONDS = 20.0


@dataclass
class HardwareFaults(Scenario):
    """Steady serving, and from 20 s: NVLink CRC errors on GPU 1, PCIe replays on GPU 0, XID 48 on GPU 3
    and XID 79 on GPU 2 (which then falls off the bus). For dashboards and alerts about faults."""

    name: ClassVar[str] = "hardware-faults"
    description: ClassVar[str] = (
        "steady load; NVLink CRC errors, PCIe replays, XID 48 and a GPU lost (XID 79)"
    )
    emitted: set[tuple[int, int]] = field(default_factory=set)

    def gpu_load(self, t: float) -> float:
        return 0.6

    def engine_load(self, t: float) -> EngineLoad:
        return STEADY_ENGINE

    def apply(self, fleet: SimulatedFleet, t: float) -> None:
        super().apply(fleet, t)
        if t < FAULTS_START_SECONDS:
            return
        with fleet.lock:
            faulty = fleet.gpus[: min(4, len(fleet.gpus))]
            if len(faulty) > 1:
                fleet.nvlink_crc_burst(1, 0, 5.0)
            # Counters are set from t, not incremented per call: apply stays idempotent.
            faulty[0].pcie_replays = max(faulty[0].pcie_replays, int(3 * (t - FAULTS_START_SECONDS)))
            for index, xid in ((3, 48), (2, 79)):
                if index < len(faulty) and (index, xid) not in self.emitted:
                    self.emitted.add((index, xid))
                    fleet.emit_xid(index, xid)
                    if xid == 79:
                        fleet.lose_gpu(index)
