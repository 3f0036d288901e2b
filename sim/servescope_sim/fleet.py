"""The simulated fleet: GPU state that evolves with load, deterministic for a seed and a clock.

Time advances in fixed steps, so the state at a given simulated time depends only on the seed and on
the scenario hooks applied, never on how often NVML was polled. Each GPU's state and dynamics: sim_gpu.py.
"""

from __future__ import annotations

import math
import random
import threading
import time
import uuid as uuidlib
from collections.abc import Callable

from servescope_sim.models import MODELS, GpuModel
from servescope_sim.sim_gpu import SimGpu

STEP_SECONDS = 0.5


def _new_gpus(count: int, spec: GpuModel, seed: int, nvlinks: int | None) -> list[SimGpu]:
    """`count` GPUs of model `spec`, their UUIDs, phases and noise streams drawn from `seed`."""
    seeded = random.Random(seed)
    return [
        SimGpu(
            index=i,
            uuid=f"GPU-{uuidlib.UUID(int=seeded.getrandbits(128), version=4)}",
            pci_bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0",
            model=spec,
            rng=random.Random(f"{seed}/{i}"),
            phase=seeded.uniform(0, 2 * math.pi),
            nvlinks=spec.nvlinks if nvlinks is None else nvlinks,
        )
        for i in range(count)
    ]


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
        self.driver_version = "570.133.20"
        self.gpus = _new_gpus(gpus, MODELS[model], seed, nvlinks)
        for gpu in self.gpus:
            gpu.step(self.elapsed, 0.0)
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
                    gpu.step(self.elapsed, STEP_SECONDS)

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
