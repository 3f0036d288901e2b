"""The simulated fleet: GPU state that evolves with load, deterministic for a seed and a clock.

Time advances in fixed steps, so the state at a given simulated time depends only on the seed and on
the scenario hooks applied, never on how often NVML was polled.
"""

from __future__ import annotations

import math
import random
import threading
import time
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, field

from .models import MIB, MODELS, GpuModel

STEP_SECONDS = 0.5
# vLLM preallocates gpu_memory_utilization (0.9 by default) of the device at start.
SERVING_MEMORY_FRACTION = 0.9
CUDA_CONTEXT_BYTES = 512 * MIB
LOAD_PERIOD_SECONDS = 900.0


@dataclass(slots=True)
class SimGpu:
    index: int
    uuid: str
    pci_bus_id: str
    model: GpuModel
    rng: random.Random
    phase: float
    nvlinks: int
    load_override: float | None = None
    load: float = 0.5
    utilization: float = 0.5
    memory_activity: float = 0.3
    power_watts: float = 0.0
    temperature: float = 35.0
    energy_mj: float = 0.0
    sm_clock_mhz: float = 0.0
    clock_reasons: int = 0
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

    @property
    def pool_bytes(self) -> int:
        return int(self.model.memory_bytes * SERVING_MEMORY_FRACTION)

    @property
    def used_bytes(self) -> int:
        if not self.serving:
            return self.model.reserved_bytes
        used = self.model.reserved_bytes + self.pool_bytes + self.leaked
        return int(min(used, self.model.memory_bytes))

    @property
    def worker_pid(self) -> int:
        return self.pid or 41_000 + 16 * self.index


class SimulatedFleet:
    """GPUs with load-driven dynamics and the fault hooks scenarios use."""

    def __init__(
        self,
        gpus: int = 8,
        model: str = "H200",
        seed: int = 1,
        *,
        nvlinks: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if model not in MODELS:
            raise ValueError(f"unknown GPU model {model!r}; known: {', '.join(sorted(MODELS))}")
        if gpus < 0:
            raise ValueError("gpus must be >= 0")
        self.lock = threading.RLock()
        self.seed = seed
        self._clock = clock
        self._start = clock()
        self._steps = 0
        spec = MODELS[model]
        links = spec.nvlinks if nvlinks is None else nvlinks
        seeded = random.Random(seed)
        self.driver_version = "570.133.20"
        self.gpus = [
            SimGpu(
                index=i,
                uuid=f"GPU-{uuidlib.UUID(int=seeded.getrandbits(128), version=4)}",
                pci_bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0",
                model=spec,
                rng=random.Random(f"{seed}/{i}"),
                phase=seeded.uniform(0, 2 * math.pi),
                nvlinks=links,
            )
            for i in range(gpus)
        ]
        for gpu in self.gpus:
            self._step_gpu(gpu, 0.0)
        # Faults at the library level, set by tests and scenarios.
        self.init_error: int | None = None
        self.unsupported: dict[tuple[int | None, str], int] = {}  # (gpu or None for all, call) -> code
        self.xid_queue: list[tuple[int, int]] = []
        self.xid_ready = threading.Condition(self.lock)

    # --- time --------------------------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        return self._steps * STEP_SECONDS

    def advance(self) -> None:
        """Bring the state up to the clock, one fixed step at a time."""
        with self.lock:
            due = int((self._clock() - self._start) / STEP_SECONDS)
            while self._steps < due:
                self._steps += 1
                for gpu in self.gpus:
                    self._step_gpu(gpu, STEP_SECONDS)

    def _step_gpu(self, gpu: SimGpu, dt: float) -> None:
        t = self.elapsed
        rng = gpu.rng
        if gpu.load_override is not None:
            target = gpu.load_override
        else:
            target = 0.55 + 0.25 * math.sin(2 * math.pi * t / LOAD_PERIOD_SECONDS + gpu.phase)
        # Load drifts toward its target with some inertia and noise, as request mixes do.
        gpu.load = min(1.0, max(0.0, gpu.load + 0.3 * (target - gpu.load) + rng.gauss(0, 0.02)))
        busy = gpu.load if gpu.serving else 0.0
        gpu.utilization = min(1.0, max(0.0, busy + rng.gauss(0, 0.02))) if busy else 0.0
        gpu.memory_activity = min(1.0, max(0.0, 0.65 * gpu.utilization + rng.gauss(0, 0.01)))
        self._step_power(gpu, dt)
        self._step_faults(gpu, dt)

    def _step_power(self, gpu: SimGpu, dt: float) -> None:
        m = gpu.model
        demand = m.idle_watts + (m.power_limit_watts * 1.05 - m.idle_watts) * gpu.utilization**1.2
        demand += gpu.rng.gauss(0, 4.0)
        capped = demand >= m.power_limit_watts * 0.98
        gpu.power_watts = max(m.idle_watts * 0.9, min(demand, m.power_limit_watts * 0.99))
        gpu.energy_mj += gpu.power_watts * dt * 1000.0
        target = 27.0 + 52.0 * gpu.power_watts / m.power_limit_watts
        gpu.temperature += (target - gpu.temperature) * (1 - math.exp(-dt / 20.0)) if dt else 0.0
        if gpu.utilization < 0.01:
            gpu.sm_clock_mhz, gpu.clock_reasons = 345.0, 0x1  # GpuIdle
        elif capped:
            gpu.sm_clock_mhz, gpu.clock_reasons = m.sm_clock_mhz * 0.9, 0x4  # SwPowerCap
        else:
            gpu.sm_clock_mhz, gpu.clock_reasons = float(m.sm_clock_mhz), 0

    def _step_faults(self, gpu: SimGpu, dt: float) -> None:
        if gpu.serving and gpu.leak_rate:
            gpu.leaked += gpu.leak_rate * dt
            if gpu.used_bytes >= gpu.model.memory_bytes:
                # The engine dies of OOM: its memory is released and the GPU goes idle.
                gpu.serving, gpu.leaked, gpu.oom_at = False, 0.0, self.elapsed
        for link, rate in gpu.crc_rates.items():
            key = (link, 2)  # NVML_NVLINK_ERROR_DL_CRC_FLIT
            gpu.nvlink_errors[key] = gpu.nvlink_errors.get(key, 0.0) + rate * dt
            gpu.nvlink_errors[(link, 0)] = gpu.nvlink_errors.get((link, 0), 0.0) + rate * dt / 4

    # --- scenario hooks ----------------------------------------------------------------------------
    def set_load(self, index: int, load: float | None) -> None:
        with self.lock:
            self.gpus[index].load_override = load

    def start_leak(self, index: int, bytes_per_second: float) -> None:
        with self.lock:
            self.gpus[index].leak_rate = bytes_per_second

    def nvlink_crc_burst(self, index: int, link: int, errors_per_second: float) -> None:
        with self.lock:
            self.gpus[index].crc_rates[link] = errors_per_second

    def set_link_down(self, index: int, link: int, down: bool = True) -> None:
        with self.lock:
            (self.gpus[index].down_links.add if down else self.gpus[index].down_links.discard)(link)

    def assign_process(self, index: int, pid: int) -> None:
        """Make `pid` the compute process of GPU `index` (the simulated engine serving it)."""
        with self.lock:
            self.gpus[index].pid = pid

    def lose_gpu(self, index: int, lost: bool = True) -> None:
        with self.lock:
            self.gpus[index].lost = lost

    def set_mig(self, index: int, enabled: bool = True) -> None:
        with self.lock:
            self.gpus[index].mig = enabled

    def emit_xid(self, index: int, xid: int) -> None:
        with self.xid_ready:
            self.xid_queue.append((index, xid))
            self.xid_ready.notify_all()
