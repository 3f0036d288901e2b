"""Faults beyond the production `FaultPlan`: NVML failing node-wide, a hung source, a link down, and more.

`NodeFaults` is a `PlanScenario` with more timed faults. Those on the hardware (NVML failing node-wide,
a link going down, each engine's own load) are applied to the simulated fleet at every tick, as the
production faults are; those on processes (the NVML source hanging in a call, an engine scheduler that
stops stepping, a KV gauge left high after aborts, the exporter rolled out to a new pod) are asked by
the benchmark's node (`node.py`) through the methods of this class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from servescope.exporter.nvml.errors import DRIVER_NOT_LOADED
from servescope_sim.fault_scenarios import CRC_LINK, EngineFault, GpuFault, Window
from servescope_sim.fleet import SimulatedFleet
from servescope_sim.pynvml_module import SimulatedPynvml
from servescope_sim.scenarios import EngineLoad
from servescope_sim.vllm_engine import SimulatedEngine

from .scenarios import CHAT_OUTPUT, CHAT_PROMPT, REQUESTS_AT_FULL_LOAD, Curve, PlanScenario

# Every per-GPU call of the simulated NVML: a node-wide failure makes each of them fail, not only init.
DEVICE_CALLS = tuple(name for name in dir(SimulatedPynvml) if name.startswith("nvmlDevice"))
# A x16 link that retrained at half its lanes (a loose riser, a slot's bad lane): still up, half as fast.
PCIE_NARROW_WIDTH = 8


@dataclass(frozen=True)
class EngineCurve:
    """Engine `engine` and its GPUs follow their own load curve instead of the plan's."""

    engine: int
    gpus: tuple[int, ...]
    curve: Curve


@dataclass(frozen=True)
class StuckKv:
    """Engine `engine` reports KV usage of at least `ratio` during `window` (vLLM #22545: after aborts)."""

    engine: int
    ratio: float
    window: Window


class FaultableEngine(SimulatedEngine):
    """The simulator's engine, whose KV gauge a fault can hold high while its blocks are free."""

    kv_floor: float | None = None

    @property
    def kv_cache_usage(self) -> float:
        real = self.real_kv_cache_usage
        return real if self.kv_floor is None else max(real, self.kv_floor)

    @property
    def real_kv_cache_usage(self) -> float:
        return SimulatedEngine.kv_cache_usage.fget(self)  # type: ignore[attr-defined,no-any-return]


@dataclass
class NodeFaults(PlanScenario):
    """A plan's load and production faults, plus the node and process faults of this module."""

    name: ClassVar[str] = "benchmark-node-faults"
    engine_curves: tuple[EngineCurve, ...] = ()
    nvml_failure: Window | None = None
    nvml_hung: Window | None = None
    link_down: GpuFault | None = None
    hung_engine: EngineFault | None = None  # its scheduler stops stepping; its server still answers
    stuck_kv: StuckKv | None = None
    rollout_at: float | None = None  # the exporter restarts in a new pod (its `instance`, the node, stays)
    pcie_narrow: GpuFault | None = None  # the GPU's PCIe link retrains at PCIE_NARROW_WIDTH lanes
    sglang_engines: tuple[int, ...] = ()  # these engines serve SGLang's /metrics (see sglang_text.py)
    _failing: bool = field(default=False, init=False, repr=False)

    def engine_loads(self, t: float, engines: int) -> list[EngineLoad]:
        loads = super().engine_loads(t, engines)
        for own in self.engine_curves:
            if own.engine < engines and not loads[own.engine].down:
                rate = round(REQUESTS_AT_FULL_LOAD * own.curve.at(t), 1)
                loads[own.engine] = EngineLoad(
                    arrival_rate=rate, prompt_tokens=CHAT_PROMPT, output_tokens=CHAT_OUTPUT
                )
        return loads

    def apply(self, fleet: SimulatedFleet, t: float) -> None:
        with fleet.lock:
            super().apply(fleet, t)
            for own in self.engine_curves:
                for index in own.gpus:
                    fleet.set_load(index, own.curve.at(t))
            if self.link_down is not None:
                fleet.set_link_down(self.link_down.gpu, CRC_LINK, self.link_down.window.active(t))
            if self.nvml_failure is not None:
                self._fail_nvml(fleet, self.nvml_failure.active(t))

    def _fail_nvml(self, fleet: SimulatedFleet, failing: bool) -> None:
        # The kernel module gone (a driver crash, an upgrade half done): init and every call fail alike.
        if failing == self._failing:
            return
        self._failing = failing
        fleet.init_error = DRIVER_NOT_LOADED if failing else None
        for call in DEVICE_CALLS:
            if failing:
                fleet.unsupported[(None, call)] = DRIVER_NOT_LOADED
            else:
                fleet.unsupported.pop((None, call), None)

    def source_hung(self, t: float) -> bool:
        """True while the NVML source is stuck in a call: it neither collects nor publishes."""
        return self.nvml_hung is not None and self.nvml_hung.active(t)

    def engine_hung(self, index: int, t: float) -> bool:
        """True while engine `index`'s scheduler has stopped stepping (its server still answers)."""
        hung = self.hung_engine
        return hung is not None and hung.engine == index and hung.window.active(t)

    def kv_floor(self, index: int, t: float) -> float | None:
        stuck = self.stuck_kv
        active = stuck is not None and stuck.engine == index and stuck.window.active(t)
        return stuck.ratio if stuck is not None and active else None

    def pcie_widths(self, t: float) -> dict[int, int]:
        """The PCIe link widths NVML reports below the GPUs' maximum at `t` (GPU index -> lanes)."""
        narrow = self.pcie_narrow
        return {narrow.gpu: PCIE_NARROW_WIDTH} if narrow is not None and narrow.window.active(t) else {}
