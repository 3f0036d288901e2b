"""The simulated fleet: GPU state that evolves with load, deterministic for a seed and a clock.

Time advances in fixed steps, so the state at a given simulated time depends only on the seed and on
the scenario hooks applied, never on how often NVML was polled.

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
import threading
import time
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, field

from servescope.sim.models import MIB, MODELS, GpuModel

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
        gpu.now = t
        rng = gpu.rng
        if gpu.load_override is not None:
            target = gpu.load_override
        else:
            target = 0.55 + 0.25 * math.sin(2 * math.pi * t / LOAD_PERIOD_SECONDS + gpu.phase)
        # Load drifts toward its target with some inertia and noise, as request mixes do.
        gpu.load = min(1.0, max(0.0, gpu.load + 0.3 * (target - gpu.load) + rng.gauss(0, 0.02)))
        gpu.load_trend = min(1.0, max(0.0, gpu.load_trend + 0.3 * (target - gpu.load_trend)))
        busy = gpu.load if gpu.serving else 0.0
        gpu.utilization = min(1.0, max(0.0, busy + rng.gauss(0, 0.02))) if busy else 0.0
        gpu.memory_activity = min(1.0, max(0.0, 0.65 * gpu.utilization + rng.gauss(0, 0.01)))
        self._step_power(gpu, dt)
        self._step_memory(gpu)
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

    def _step_memory(self, gpu: SimGpu) -> None:
        # Draw only when noise is on: a draw shifts the GPU's other random streams, and an unprofiled
        # fleet must keep producing exactly what it always did for its seed.
        gpu.jitter = gpu.rng.gauss(0.0, gpu.noise_bytes) if gpu.noise_bytes > 0 else 0.0
        gpu.spikes = [spike for spike in gpu.spikes if gpu.now < spike[0]]

    def _step_faults(self, gpu: SimGpu, dt: float) -> None:
        if gpu.serving and gpu.leak_rate:
            gpu.leaked += gpu.leak_rate * dt
        if gpu.serving and gpu.demand_bytes >= gpu.model.memory_bytes:
            # The engine dies of OOM, whatever grew (a leak, traffic, a spike): its memory is released
            # and the GPU goes idle.
            gpu.serving, gpu.leaked, gpu.oom_at = False, 0.0, self.elapsed
            gpu.spikes.clear()
        for link, rate in gpu.crc_rates.items():
            key = (link, 2)  # NVML_NVLINK_ERROR_DL_CRC_FLIT
            gpu.nvlink_errors[key] = gpu.nvlink_errors.get(key, 0.0) + rate * dt
            data = (link, 3)  # NVML_NVLINK_ERROR_DL_CRC_DATA
            gpu.nvlink_errors[data] = gpu.nvlink_errors.get(data, 0.0) + rate * dt / 4

    # --- scenario hooks ----------------------------------------------------------------------------
    def set_load(self, index: int, load: float | None) -> None:
        with self.lock:
            self.gpus[index].load_override = load

    def start_leak(self, index: int, bytes_per_second: float) -> None:
        with self.lock:
            self.gpus[index].leak_rate = bytes_per_second

    def set_memory_profile(
        self,
        index: int | None,
        *,
        workspace_bytes: float | None = None,
        sawtooth_bytes: float | None = None,
        sawtooth_period_s: float | None = None,
        noise_bytes: float | None = None,
    ) -> None:
        """Set the memory knobs of GPU `index` (every GPU when None); a knob left None keeps its value."""
        given = {
            "workspace_bytes": workspace_bytes,
            "sawtooth_bytes": sawtooth_bytes,
            "sawtooth_period_s": sawtooth_period_s,
            "noise_bytes": noise_bytes,
        }
        bad = [
            f"{k} must be finite and >= 0, got {v}"
            for k, v in given.items()
            if v is not None and not 0 <= v < math.inf
        ]
        if bad:
            raise ValueError("; ".join(bad))
        with self.lock:
            targets = self.gpus if index is None else [self.gpus[index]]
            for gpu in targets:
                period = gpu.sawtooth_period_s if sawtooth_period_s is None else sawtooth_period_s
                height = gpu.sawtooth_bytes if sawtooth_bytes is None else sawtooth_bytes
                if height > 0 and period <= 0:
                    raise ValueError("a sawtooth needs sawtooth_period_s > 0")
            for gpu in targets:
                for name, value in given.items():
                    if value is not None:
                        setattr(gpu, name, float(value))

    def spike(self, index: int, bytes: float, seconds: float) -> None:
        """Hold `bytes` more on GPU `index` for `seconds` of simulated time from now (the clock's now)."""
        if not 0 <= bytes < math.inf or not 0 < seconds < math.inf:
            raise ValueError(f"a spike needs bytes >= 0 and seconds > 0, got {bytes} and {seconds}")
        with self.lock:
            # "From now" is the clock's now: catch up first, or the spike would start in the past.
            self.advance()
            self.gpus[index].spikes.append((self.elapsed + seconds, float(bytes)))

    def true_seconds_to_exhaustion(self, index: int) -> float:
        """Seconds from now until GPU `index`'s leak fills the device, by the noise-free trend.

        "Truth" is what a perfect trend estimator should report: the headroom left under the memory
        trend (reserved + pool + leaked + workspace x the noise-free load trend + the sawtooth's mean)
        divided by the leak rate. It assumes the load and leak rate stay as they are and ignores
        jitter and spikes, so the engine really dies a little earlier (up to half a sawtooth's height,
        plus any noise, divided by the leak rate). `inf` when the GPU is not leaking or not serving.
        """
        with self.lock:
            self.advance()
            gpu = self.gpus[index]
            if not gpu.serving or gpu.leak_rate <= 0:
                return math.inf
            mean_sawtooth = gpu.sawtooth_bytes / 2 if gpu.sawtooth_period_s > 0 else 0.0
            trend = (
                gpu.model.reserved_bytes
                + gpu.pool_bytes
                + gpu.leaked
                + gpu.workspace_bytes * gpu.load_trend
                + mean_sawtooth
            )
            return max(0.0, gpu.model.memory_bytes - trend) / gpu.leak_rate

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
