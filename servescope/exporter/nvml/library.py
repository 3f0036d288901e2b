"""The one small interface between servescope and NVML.

`NvmlLibrary` wraps a pynvml-shaped module: the real `pynvml` from nvidia-ml-py in production, the
simulator's module (servescope_sim.pynvml_module) with --simulate and in tests. Everything above this
file sees plain Python values and `NvmlError`, never ctypes structures or binding exceptions.
"""

from __future__ import annotations

import ctypes
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pynvml

from servescope.exporter.nvml.errors import NvmlError

# Constants are plain integers from the binding; they do not need the driver.
CLOCK_SM = pynvml.NVML_CLOCK_SM
CLOCK_MEM = pynvml.NVML_CLOCK_MEM
TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
MEMORY_V2 = pynvml.nvmlMemory_v2
ECC_CORRECTED = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
ECC_UNCORRECTED = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
ECC_VOLATILE = pynvml.NVML_VOLATILE_ECC
ECC_AGGREGATE = pynvml.NVML_AGGREGATE_ECC
RETIRE_SBE = pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
RETIRE_DBE = pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
NVLINK_MAX_LINKS = pynvml.NVML_NVLINK_MAX_LINKS
NVLINK_REPLAY = pynvml.NVML_NVLINK_ERROR_DL_REPLAY
NVLINK_RECOVERY = pynvml.NVML_NVLINK_ERROR_DL_RECOVERY
NVLINK_CRC_FLIT = pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT
NVLINK_CRC_DATA = pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA
EVENT_XID = pynvml.nvmlEventTypeXidCriticalError

# Clock event (throttle) reason bits, named as exported.
CLOCK_EVENT_REASONS: tuple[tuple[str, int], ...] = (
    ("gpu_idle", pynvml.nvmlClocksEventReasonGpuIdle),
    ("applications_clocks_setting", pynvml.nvmlClocksEventReasonApplicationsClocksSetting),
    ("sw_power_cap", pynvml.nvmlClocksEventReasonSwPowerCap),
    ("hw_slowdown", pynvml.nvmlClocksEventReasonHwSlowdown),
    ("sync_boost", pynvml.nvmlClocksEventReasonSyncBoost),
    ("sw_thermal_slowdown", pynvml.nvmlClocksEventReasonSwThermalSlowdown),
    ("hw_thermal_slowdown", pynvml.nvmlClocksEventReasonHwThermalSlowdown),
    ("hw_power_brake_slowdown", pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown),
    ("display_clock_setting", pynvml.nvmlClocksEventReasonDisplayClockSetting),
)


@dataclass(frozen=True, slots=True)
class MemoryInfo:
    total: int
    free: int
    used: int
    reserved: int | None  # None from the v1 call


@dataclass(frozen=True, slots=True)
class ComputeProcess:
    pid: int
    used_bytes: int | None


@dataclass(frozen=True, slots=True)
class XidEvent:
    device_key: Any  # handle_key() of the GPU it happened on
    xid: int


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


class NvmlLibrary:
    """Typed calls over a pynvml-shaped module; every binding error becomes `NvmlError`."""

    def __init__(self, module: ModuleType | Any | None = None) -> None:
        self._m = module if module is not None else importlib.import_module("pynvml")

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(self._m, name)(*args, **kwargs)
        except pynvml.NVMLError as exc:
            raise NvmlError(int(exc.value), name) from None

    # --- library -----------------------------------------------------------------------------
    def init(self) -> None:
        self._call("nvmlInit")

    def shutdown(self) -> None:
        self._call("nvmlShutdown")

    def driver_version(self) -> str:
        return _text(self._call("nvmlSystemGetDriverVersion"))

    def device_count(self) -> int:
        return int(self._call("nvmlDeviceGetCount"))

    def handle(self, index: int) -> Any:
        return self._call("nvmlDeviceGetHandleByIndex", index)

    @staticmethod
    def handle_key(h: Any) -> Any:
        """A hashable identity for a device handle (ctypes returns a new pointer object each time)."""
        try:
            return ctypes.cast(h, ctypes.c_void_p).value
        except (TypeError, ctypes.ArgumentError):
            return h

    # --- static facts ------------------------------------------------------------------------
    def uuid(self, h: Any) -> str:
        return _text(self._call("nvmlDeviceGetUUID", h))

    def name(self, h: Any) -> str:
        return _text(self._call("nvmlDeviceGetName", h))

    def pci_bus_id(self, h: Any) -> str:
        return _text(self._call("nvmlDeviceGetPciInfo", h).busId)

    def mig_mode(self, h: Any) -> int:
        current, _pending = self._call("nvmlDeviceGetMigMode", h)
        return int(current)

    def max_mig_devices(self, h: Any) -> int:
        return int(self._call("nvmlDeviceGetMaxMigDeviceCount", h))

    def mig_handle(self, h: Any, index: int) -> Any:
        """The MIG device in slot `index` of a MIG-enabled GPU (NvmlError not_found: an empty slot)."""
        return self._call("nvmlDeviceGetMigDeviceHandleByIndex", h, index)

    def mig_instances(self, mig: Any) -> tuple[int, int]:
        """(GPU instance id, compute instance id) of a MIG device: what `nvidia-smi` shows as GI and CI."""
        return int(self._call("nvmlDeviceGetGpuInstanceId", mig)), int(
            self._call("nvmlDeviceGetComputeInstanceId", mig)
        )

    # --- readings ----------------------------------------------------------------------------
    def memory_info(self, h: Any, v2: bool = True) -> MemoryInfo:
        if v2:
            m = self._call("nvmlDeviceGetMemoryInfo", h, version=MEMORY_V2)
            return MemoryInfo(int(m.total), int(m.free), int(m.used), int(m.reserved))
        m = self._call("nvmlDeviceGetMemoryInfo", h)
        return MemoryInfo(int(m.total), int(m.free), int(m.used), None)

    def utilization(self, h: Any) -> tuple[float, float]:
        """GPU and memory activity as ratios 0-1."""
        u = self._call("nvmlDeviceGetUtilizationRates", h)
        return u.gpu / 100.0, u.memory / 100.0

    def temperature_celsius(self, h: Any) -> float:
        return float(self._call("nvmlDeviceGetTemperature", h, TEMPERATURE_GPU))

    def power_watts(self, h: Any) -> float:
        return float(self._call("nvmlDeviceGetPowerUsage", h)) / 1000.0

    def power_limit_watts(self, h: Any) -> float:
        return float(self._call("nvmlDeviceGetEnforcedPowerLimit", h)) / 1000.0

    def energy_joules(self, h: Any) -> float:
        return float(self._call("nvmlDeviceGetTotalEnergyConsumption", h)) / 1000.0

    def clock_hertz(self, h: Any, clock: int) -> float:
        return float(self._call("nvmlDeviceGetClockInfo", h, clock)) * 1e6

    def clock_event_reasons(self, h: Any) -> int:
        try:
            return int(self._call("nvmlDeviceGetCurrentClocksEventReasons", h))
        except NvmlError as exc:
            if exc.reason != "function_not_found":
                raise
        # Drivers before 535 only know the older name of the same bitmask.
        return int(self._call("nvmlDeviceGetCurrentClocksThrottleReasons", h))

    def pcie_replay_counter(self, h: Any) -> int:
        return int(self._call("nvmlDeviceGetPcieReplayCounter", h))

    def pcie_link(self, h: Any) -> tuple[int, int, int, int]:
        """Current and maximum PCIe generation, then current and maximum width (lanes)."""
        return (
            int(self._call("nvmlDeviceGetCurrPcieLinkGeneration", h)),
            int(self._call("nvmlDeviceGetMaxPcieLinkGeneration", h)),
            int(self._call("nvmlDeviceGetCurrPcieLinkWidth", h)),
            int(self._call("nvmlDeviceGetMaxPcieLinkWidth", h)),
        )

    def ecc_errors(self, h: Any, error_type: int, counter_type: int) -> int:
        return int(self._call("nvmlDeviceGetTotalEccErrors", h, error_type, counter_type))

    def retired_pages(self, h: Any, cause: int) -> int:
        return len(self._call("nvmlDeviceGetRetiredPages", h, cause))

    def retired_pages_pending(self, h: Any) -> bool:
        return bool(self._call("nvmlDeviceGetRetiredPagesPendingStatus", h))

    def remapped_rows(self, h: Any) -> tuple[int, int, bool, bool]:
        """Correctable rows, uncorrectable rows, remap pending, remap failed."""
        corr, unc, pending, failed = self._call("nvmlDeviceGetRemappedRows", h)
        return int(corr), int(unc), bool(pending), bool(failed)

    def nvlink_active(self, h: Any, link: int) -> bool:
        return bool(self._call("nvmlDeviceGetNvLinkState", h, link))

    def nvlink_error_counter(self, h: Any, link: int, counter: int) -> int:
        return int(self._call("nvmlDeviceGetNvLinkErrorCounter", h, link, counter))

    def compute_processes(self, h: Any) -> list[ComputeProcess]:
        return [
            ComputeProcess(int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory))
            for p in self._call("nvmlDeviceGetComputeRunningProcesses", h)
        ]

    # --- XID events --------------------------------------------------------------------------
    def event_set_create(self) -> Any:
        return self._call("nvmlEventSetCreate")

    def register_xid_events(self, h: Any, event_set: Any) -> None:
        self._call("nvmlDeviceRegisterEvents", h, EVENT_XID, event_set)

    def event_wait(self, event_set: Any, timeout_ms: int) -> XidEvent | None:
        """The next XID event, or None when `timeout_ms` passed without one."""
        try:
            data = self._call("nvmlEventSetWait_v2", event_set, timeout_ms)
        except NvmlError as exc:
            if exc.reason == "timeout":
                return None
            raise
        if not data.eventType & EVENT_XID:
            return None
        # Resolved to a UUID by the caller's table: asking NVML for the UUID of a GPU that just
        # fell off the bus (XID 79) would fail.
        return XidEvent(self.handle_key(data.device), int(data.eventData))

    def event_set_free(self, event_set: Any) -> None:
        self._call("nvmlEventSetFree", event_set)
