"""One simulated GPU: its state and how one fixed time step changes it with load.

Device memory of a serving GPU is the sum of

    reserved                 driver/firmware, never available
    pool                     vLLM's preallocation (gpu_memory_utilization x total): flat, KV lives in it
    leaked                   a leak hook's growth
    workspace x load trend   activations and CUDA-graph buffers, sized by the batch regime
    sawtooth                 the caching allocator: grows linearly, then a cache flush drops it
    jitter                   Gaussian noise drawn each step
    spikes                   short allocations from a hook, for a given span of simulated time

clamped to [reserved, total]. Every knob beyond the pool defaults to 0, so a fleet nobody profiles
reports exactly what it did before the knobs existed; when the sum reaches total the engine dies of OOM.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from servescope_sim.models import MIB, GpuModel

# vLLM preallocates gpu_memory_utilization (0.9 by default) of the device at start.
SERVING_MEMORY_FRACTION = 0.9
CUDA_CONTEXT_BYTES = 512 * MIB
LOAD_PERIOD_SECONDS = 900.0


@dataclass(slots=True)
class SimGpu:
    """One GPU's identity and state; shares are 0-1, as NVML's percentages divided by 100."""

    index: int
    uuid: str
    pci_bus_id: str
    model: GpuModel
    rng: random.Random
    phase: float  # radians: its offset on the load curve and the sawtooth, so GPUs do not move in step
    nvlinks: int
    load_override: float | None = None  # a scenario's fixed load; None follows the curve
    load: float = 0.5
    utilization: float = 0.5  # share of time a kernel ran
    memory_activity: float = 0.3  # share of time device memory was read or written
    power_watts: float = 0.0
    temperature: float = 35.0  # degrees Celsius
    energy_mj: float = 0.0  # millijoules consumed: NVML's total energy counter
    sm_clock_mhz: float = 0.0
    clock_reasons: int = 0  # NVML's clock event reason bitmask (0x1 idle, 0x4 software power cap)
    leak_rate: float = 0.0  # bytes per second
    leaked: float = 0.0
    serving: bool = True  # the simulated engine's worker holds its memory pool
    oom_at: float | None = None
    lost: bool = False
    mig: bool = False
    pcie_replays: int = 0
    nvlink_errors: dict[tuple[int, int], float] = field(default_factory=dict)
    crc_rates: dict[int, float] = field(default_factory=dict)  # link -> CRC flit errors per second
    down_links: set[int] = field(default_factory=set)
    pid: int = 0  # the compute process NVML lists (a simulated engine's real PID when one serves it)
    # Memory profile (see the module docstring); all zero unless a scenario sets them.
    workspace_bytes: float = 0.0  # at full load
    sawtooth_bytes: float = 0.0
    sawtooth_period_s: float = 0.0
    noise_bytes: float = 0.0  # standard deviation of the per-step jitter
    jitter: float = 0.0  # this step's draw, stored so that reading memory never touches the rng
    spikes: list[tuple[float, float]] = field(default_factory=list)  # (until, bytes) in simulated seconds
    # Load without its per-step noise. The workspace follows this, not `load`: the allocator sizes
    # buffers for the batch regime, and tying memory to the load's jitter would bury a slow leak in it.
    load_trend: float = 0.5
    now: float = 0.0  # simulated seconds of the last step, so time-based memory terms need no clock

    @property
    def sawtooth_level(self) -> float:
        if self.sawtooth_bytes <= 0 or self.sawtooth_period_s <= 0:
            return 0.0
        cycle = self.now / self.sawtooth_period_s + self.phase / (2 * math.pi)
        return self.sawtooth_bytes * (cycle % 1.0)

    @property
    def spike_level(self) -> float:
        return sum(size for until, size in self.spikes if self.now < until)

    @property
    def demand_bytes(self) -> float:
        """What the serving process asks for, before the device's capacity caps it."""
        return (
            self.model.reserved_bytes
            + self.pool_bytes
            + self.leaked
            + self.workspace_bytes * self.load_trend
            + self.sawtooth_level
            + self.jitter
            + self.spike_level
        )

    @property
    def pool_bytes(self) -> int:
        # vLLM profiles its peak activation memory at start and sizes the KV pool from what is left of
        # gpu_memory_utilization x total: the workspace lives inside the budget, not on top of it.
        return int(self.model.memory_bytes * SERVING_MEMORY_FRACTION - self.workspace_bytes)

    @property
    def used_bytes(self) -> int:
        if not self.serving:
            return self.model.reserved_bytes
        return int(min(max(self.demand_bytes, self.model.reserved_bytes), self.model.memory_bytes))

    @property
    def worker_pid(self) -> int:
        return self.pid or 41_000 + 16 * self.index

    def step(self, t: float, dt: float) -> None:
        """Advance this GPU by `dt` seconds to simulated time `t`: load, power, memory, faults."""
        self.now = t
        rng = self.rng
        if self.load_override is not None:
            target = self.load_override
        else:
            target = 0.55 + 0.25 * math.sin(2 * math.pi * t / LOAD_PERIOD_SECONDS + self.phase)
        # Load drifts toward its target with some inertia and noise, as request mixes do.
        self.load = min(1.0, max(0.0, self.load + 0.3 * (target - self.load) + rng.gauss(0, 0.02)))
        self.load_trend = min(1.0, max(0.0, self.load_trend + 0.3 * (target - self.load_trend)))
        busy = self.load if self.serving else 0.0
        self.utilization = min(1.0, max(0.0, busy + rng.gauss(0, 0.02))) if busy else 0.0
        self.memory_activity = min(1.0, max(0.0, 0.65 * self.utilization + rng.gauss(0, 0.01)))
        self._step_power(dt)
        self._step_memory()
        self._step_faults(dt)

    def _step_power(self, dt: float) -> None:
        m = self.model
        demand = m.idle_watts + (m.power_limit_watts * 1.05 - m.idle_watts) * self.utilization**1.2
        demand += self.rng.gauss(0, 4.0)
        capped = demand >= m.power_limit_watts * 0.98
        self.power_watts = max(m.idle_watts * 0.9, min(demand, m.power_limit_watts * 0.99))
        self.energy_mj += self.power_watts * dt * 1000.0
        target = 27.0 + 52.0 * self.power_watts / m.power_limit_watts
        self.temperature += (target - self.temperature) * (1 - math.exp(-dt / 20.0)) if dt else 0.0
        if self.utilization < 0.01:
            self.sm_clock_mhz, self.clock_reasons = 345.0, 0x1  # GpuIdle
        elif capped:
            self.sm_clock_mhz, self.clock_reasons = m.sm_clock_mhz * 0.9, 0x4  # SwPowerCap
        else:
            self.sm_clock_mhz, self.clock_reasons = float(m.sm_clock_mhz), 0

    def _step_memory(self) -> None:
        # Draw only when noise is on: a draw shifts the GPU's other random streams, and an unprofiled
        # fleet must keep producing exactly what it always did for its seed.
        self.jitter = self.rng.gauss(0.0, self.noise_bytes) if self.noise_bytes > 0 else 0.0
        self.spikes = [spike for spike in self.spikes if self.now < spike[0]]

    def _step_faults(self, dt: float) -> None:
        if self.serving and self.leak_rate:
            self.leaked += self.leak_rate * dt
        if self.serving and self.demand_bytes >= self.model.memory_bytes:
            # The engine dies of OOM, whatever grew (a leak, traffic, a spike): its memory is released
            # and the GPU goes idle.
            self.serving, self.leaked, self.oom_at = False, 0.0, self.now
            self.spikes.clear()
        for link, rate in self.crc_rates.items():
            key = (link, 2)  # NVML_NVLINK_ERROR_DL_CRC_FLIT
            self.nvlink_errors[key] = self.nvlink_errors.get(key, 0.0) + rate * dt
            data = (link, 3)  # NVML_NVLINK_ERROR_DL_CRC_DATA
            self.nvlink_errors[data] = self.nvlink_errors.get(data, 0.0) + rate * dt / 4
