"""A pynvml-shaped object backed by the simulated fleet.

It answers the same functions with the same shapes (structures with the same attribute names,
lists, integers) and raises the binding's own `NVMLError_*` classes, so the production wrapper and
collector run unchanged on it, in the demo and in tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pynvml

from servescope_sim.fleet import SimulatedFleet
from servescope_sim.sim_gpu import SimGpu

_XID = pynvml.nvmlEventTypeXidCriticalError
IDLE_UTILIZATION = 0.05  # below this a simulated GPU's PCIe link idles at Gen 1


@dataclass(frozen=True, slots=True)
class SimHandle:
    index: int


def _fail(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


class SimulatedPynvml:
    """The subset of pynvml that servescope calls."""

    NVMLError = pynvml.NVMLError

    def __init__(self, fleet: SimulatedFleet) -> None:
        self.fleet = fleet
        self._initialised = False
        self._event_sets: dict[int, set[int]] = {}
        self._next_set = 1
        # GPU index -> lanes its link retrained at (a loose riser, a bad slot); absent: the full width.
        self.pcie_trained_width: dict[int, int] = {}

    # --- plumbing -------------------------------------------------------------------------------
    def _check_init(self) -> None:
        if not self._initialised:
            raise _fail(pynvml.NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: SimHandle, call: str) -> SimGpu:
        self._check_init()
        self.fleet.advance()
        gpu = self.fleet.gpus[handle.index]
        if gpu.lost:
            raise _fail(pynvml.NVML_ERROR_GPU_IS_LOST)
        for key in ((gpu.index, call), (None, call)):
            if key in self.fleet.unsupported:
                raise _fail(self.fleet.unsupported[key])
        return gpu

    # --- library --------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        if self.fleet.init_error is not None:
            raise _fail(self.fleet.init_error)
        self._initialised = True

    def nvmlShutdown(self) -> None:
        self._check_init()
        self._initialised = False
        with self.fleet.xid_ready:
            self._event_sets.clear()
            self.fleet.xid_ready.notify_all()

    def nvmlSystemGetDriverVersion(self) -> str:
        self._check_init()
        return self.fleet.driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._check_init()
        return len(self.fleet.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimHandle:
        self._check_init()
        if not 0 <= index < len(self.fleet.gpus):
            raise _fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if self.fleet.gpus[index].lost:
            raise _fail(pynvml.NVML_ERROR_GPU_IS_LOST)
        return SimHandle(index)

    # --- static facts -----------------------------------------------------------------------------
    def nvmlDeviceGetUUID(self, h: SimHandle) -> str:
        return self._gpu(h, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetName(self, h: SimHandle) -> str:
        return self._gpu(h, "nvmlDeviceGetName").model.name

    def nvmlDeviceGetPciInfo(self, h: SimHandle) -> Any:
        return SimpleNamespace(busId=self._gpu(h, "nvmlDeviceGetPciInfo").pci_bus_id)

    def nvmlDeviceGetMigMode(self, h: SimHandle) -> list[int]:
        mode = int(self._gpu(h, "nvmlDeviceGetMigMode").mig)
        return [mode, mode]

    # --- readings -------------------------------------------------------------------------------
    def nvmlDeviceGetMemoryInfo(self, h: SimHandle, version: int | None = None) -> Any:
        gpu = self._gpu(h, "nvmlDeviceGetMemoryInfo_v2" if version else "nvmlDeviceGetMemoryInfo")
        total, used, reserved = gpu.model.memory_bytes, gpu.used_bytes, gpu.model.reserved_bytes
        if version:
            used -= reserved  # v2 reports reserved separately from used
            return SimpleNamespace(total=total, reserved=reserved, used=used, free=total - reserved - used)
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, h: SimHandle) -> Any:
        gpu = self._gpu(h, "nvmlDeviceGetUtilizationRates")
        if gpu.mig:
            raise _fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(gpu=round(gpu.utilization * 100), memory=round(gpu.memory_activity * 100))

    def nvmlDeviceGetTemperature(self, h: SimHandle, sensor: int) -> int:
        return round(self._gpu(h, "nvmlDeviceGetTemperature").temperature)

    def nvmlDeviceGetPowerUsage(self, h: SimHandle) -> int:
        return round(self._gpu(h, "nvmlDeviceGetPowerUsage").power_watts * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, h: SimHandle) -> int:
        return round(self._gpu(h, "nvmlDeviceGetEnforcedPowerLimit").model.power_limit_watts * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, h: SimHandle) -> int:
        return int(self._gpu(h, "nvmlDeviceGetTotalEnergyConsumption").energy_mj)

    def nvmlDeviceGetClockInfo(self, h: SimHandle, clock: int) -> int:
        gpu = self._gpu(h, "nvmlDeviceGetClockInfo")
        return round(gpu.sm_clock_mhz) if clock == pynvml.NVML_CLOCK_SM else gpu.model.memory_clock_mhz

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: SimHandle) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrentClocksEventReasons").clock_reasons

    def nvmlDeviceGetPcieReplayCounter(self, h: SimHandle) -> int:
        return self._gpu(h, "nvmlDeviceGetPcieReplayCounter").pcie_replays

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: SimHandle) -> int:
        gpu = self._gpu(h, "nvmlDeviceGetCurrPcieLinkGeneration")
        # An idle GPU drops its link to Gen 1 to save power and retrains at the maximum when busy.
        return gpu.model.pcie_generation if gpu.utilization >= IDLE_UTILIZATION else 1

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: SimHandle) -> int:
        return self._gpu(h, "nvmlDeviceGetMaxPcieLinkGeneration").model.pcie_generation

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: SimHandle) -> int:
        gpu = self._gpu(h, "nvmlDeviceGetCurrPcieLinkWidth")
        return self.pcie_trained_width.get(gpu.index, gpu.model.pcie_width)

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: SimHandle) -> int:
        return self._gpu(h, "nvmlDeviceGetMaxPcieLinkWidth").model.pcie_width

    def nvmlDeviceGetTotalEccErrors(self, h: SimHandle, error_type: int, counter_type: int) -> int:
        self._gpu(h, "nvmlDeviceGetTotalEccErrors")
        return 0

    def nvmlDeviceGetRetiredPages(self, h: SimHandle, cause: int) -> list[int]:
        # Ampere and later GPUs remap rows instead of retiring pages; NVML says NotSupported.
        self._gpu(h, "nvmlDeviceGetRetiredPages")
        raise _fail(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: SimHandle) -> int:
        self._gpu(h, "nvmlDeviceGetRetiredPagesPendingStatus")
        raise _fail(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetRemappedRows(self, h: SimHandle) -> tuple[int, int, int, int]:
        self._gpu(h, "nvmlDeviceGetRemappedRows")
        return (0, 0, 0, 0)

    def nvmlDeviceGetNvLinkState(self, h: SimHandle, link: int) -> int:
        gpu = self._gpu(h, "nvmlDeviceGetNvLinkState")
        if link >= gpu.nvlinks:
            raise _fail(
                pynvml.NVML_ERROR_NOT_SUPPORTED if gpu.nvlinks == 0 else pynvml.NVML_ERROR_INVALID_ARGUMENT
            )
        return 0 if link in gpu.down_links else 1

    def nvmlDeviceGetNvLinkErrorCounter(self, h: SimHandle, link: int, counter: int) -> int:
        gpu = self._gpu(h, "nvmlDeviceGetNvLinkErrorCounter")
        if link >= gpu.nvlinks:
            raise _fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return int(gpu.nvlink_errors.get((link, counter), 0))

    def nvmlDeviceGetComputeRunningProcesses(self, h: SimHandle) -> list[Any]:
        gpu = self._gpu(h, "nvmlDeviceGetComputeRunningProcesses")
        if not gpu.serving:
            return []
        used = gpu.used_bytes - gpu.model.reserved_bytes
        return [
            SimpleNamespace(
                pid=gpu.worker_pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF
            )
        ]

    # --- events ---------------------------------------------------------------------------------
    def nvmlEventSetCreate(self) -> int:
        self._check_init()
        if (None, "nvmlEventSetCreate") in self.fleet.unsupported:
            raise _fail(self.fleet.unsupported[(None, "nvmlEventSetCreate")])
        with self.fleet.xid_ready:
            handle, self._next_set = self._next_set, self._next_set + 1
            self._event_sets[handle] = set()
        return handle

    def nvmlDeviceRegisterEvents(self, h: SimHandle, event_types: int, event_set: int) -> None:
        self._gpu(h, "nvmlDeviceRegisterEvents")
        with self.fleet.xid_ready:
            self._event_sets[event_set].add(h.index)

    def nvmlEventSetWait_v2(self, event_set: int, timeout_ms: int) -> Any:
        with self.fleet.xid_ready:
            self.fleet.xid_ready.wait_for(
                lambda: event_set not in self._event_sets or bool(self._pending(event_set)),
                timeout_ms / 1000.0,
            )
            if event_set not in self._event_sets:
                raise _fail(pynvml.NVML_ERROR_UNINITIALIZED)
            pending = self._pending(event_set)
            if not pending:
                raise _fail(pynvml.NVML_ERROR_TIMEOUT)
            self.fleet.xid_queue.remove(pending[0])
            index, xid = pending[0]
        return SimpleNamespace(
            device=SimHandle(index), eventType=_XID, eventData=xid, gpuInstanceId=0, computeInstanceId=0
        )

    def _pending(self, event_set: int) -> list[tuple[int, int]]:
        watched = self._event_sets.get(event_set, set())
        return [item for item in self.fleet.xid_queue if item[0] in watched]

    def nvmlEventSetFree(self, event_set: int) -> None:
        with self.fleet.xid_ready:
            self._event_sets.pop(event_set, None)
            self.fleet.xid_ready.notify_all()
