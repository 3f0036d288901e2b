"""The NVML source: one cycle reads every GPU, tolerating each error class as NVML users learned to."""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from servescope import catalog as c
from servescope.exporter.exposition import Sample
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.nvml import library as nv
from servescope.exporter.nvml.device import Gpu
from servescope.exporter.nvml.errors import ErrorScope, NvmlError
from servescope.exporter.nvml.library import NvmlLibrary
from servescope.exporter.nvml.nvlink import LinkReading, NvlinkSeries
from servescope.exporter.nvml.xid import XidWatcher
from servescope.exporter.sources.base import Collection, Problem, SourceError
from servescope.exporter.stores.history import MemoryHistory
from servescope.exporter.stores.nvlink import NvlinkLinks

log = logging.getLogger(__name__)

_HINTS = {
    "library_not_found": "libnvidia-ml.so.1 was not found: is the NVIDIA driver installed and visible to "
    "this process (in a container: the NVIDIA container toolkit)? To try servescope without a GPU, "
    "run with --simulate",
    "driver_not_loaded": "the NVIDIA kernel driver is not loaded",
    "lib_rm_version_mismatch": "libnvidia-ml and the kernel driver differ in version (driver upgraded "
    "without a reboot?)",
}
_NVLINK_COUNTERS = (
    ("crc_flit", nv.NVLINK_CRC_FLIT),
    ("crc_data", nv.NVLINK_CRC_DATA),
    ("replay", nv.NVLINK_REPLAY),
    ("recovery", nv.NVLINK_RECOVERY),
)
_ECC = (
    ("corrected", "volatile", nv.ECC_CORRECTED, nv.ECC_VOLATILE),
    ("uncorrected", "volatile", nv.ECC_UNCORRECTED, nv.ECC_VOLATILE),
    ("corrected", "aggregate", nv.ECC_CORRECTED, nv.ECC_AGGREGATE),
    ("uncorrected", "aggregate", nv.ECC_UNCORRECTED, nv.ECC_AGGREGATE),
)
_MIG = {0: "disabled", 1: "enabled"}
# While a GPU stays lost, re-enumerate at most this often (re-initialising also restarts the XID watcher).
DEVICE_REINIT_SECONDS = 30.0


class NvmlSource:
    """Source `nvml`: per-GPU series, lifecycle handling, XID counts."""

    name = "nvml"

    def __init__(
        self,
        lib: NvmlLibrary,
        *,
        hostname: str,
        interval_seconds: float = 1.0,
        xid_events: bool = True,
        nvlink_per_link: bool = False,
        link_store: NvlinkLinks | None = None,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        directory: GpuDirectory | None = None,
        history: MemoryHistory | None = None,
    ) -> None:
        self.interval_seconds = interval_seconds
        self.history = history
        self.directory = directory or GpuDirectory()
        self._lib = lib
        self._hostname = hostname
        self._monotonic = monotonic
        self._xid = XidWatcher(lib, wall) if xid_events else None
        kinds = tuple(kind for kind, _ in _NVLINK_COUNTERS)
        self._nvlinks = NvlinkSeries(kinds, per_link=nvlink_per_link, store=link_store)
        self._initialised = False
        self._reinit_due: float | None = 0.0  # None: no re-initialisation pending
        self._last_init = float("-inf")
        self._driver = ""
        self._gpus: list[Gpu] = []
        self._lost: dict[str, Gpu] = {}  # GPUs seen once and missing now: exported as down, not dropped
        self._support: dict[str, dict[str, bool]] = {}  # uuid -> field -> supported
        self._xid_unavailable = False
        self._v1_memory: set[str] = set()
        self._problems: list[Problem] = []

    # --- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        if self._xid is not None:
            self._xid.stop()
        if self._initialised:
            with contextlib.suppress(NvmlError):
                self._lib.shutdown()
            self._initialised = False

    def _schedule_reinit(self, device_only: bool) -> None:
        now = self._monotonic()
        due = max(now, self._last_init + DEVICE_REINIT_SECONDS) if device_only else now
        self._reinit_due = due if self._reinit_due is None else min(self._reinit_due, due)

    def _library_error(self, exc: NvmlError) -> SourceError:
        self._schedule_reinit(device_only=False)
        hint = _HINTS.get(exc.reason)
        return SourceError(exc.reason, f"{exc}: {hint}" if hint else str(exc))

    def _initialise(self) -> None:
        self._xid_unavailable = False
        if self._xid is not None:
            self._xid.stop()
        if self._initialised:
            with contextlib.suppress(NvmlError):
                self._lib.shutdown()
            self._initialised = False
        self._last_init = self._monotonic()
        self._reinit_due = None
        try:
            self._lib.init()
        except NvmlError:
            self._reinit_due = self._last_init
            raise
        self._initialised = True
        self._driver = self._lib.driver_version()
        previous = {gpu.uuid: gpu for gpu in self._gpus} | self._lost
        self._gpus = self._enumerate()
        self.directory.update({str(gpu.index): gpu.uuid for gpu in self._gpus})
        present = {gpu.uuid for gpu in self._gpus}
        self._lost = {uuid: gpu for uuid, gpu in previous.items() if uuid not in present}
        for gpu in self._lost.values():
            gpu.up = False
        if self._xid is not None:
            self._start_xid_watcher()

    def _enumerate(self) -> list[Gpu]:
        count = self._lib.device_count()
        if count == 0:
            self._schedule_reinit(device_only=False)
            raise SourceError(
                "no_gpus",
                "NVML reports zero GPUs on this node; a GPU node without GPUs is a failure, not an idle node",
            )
        gpus = []
        for index in range(count):
            try:
                gpus.append(self._describe(index))
            except NvmlError as exc:
                if exc.scope is ErrorScope.LIBRARY:
                    raise
                self._problems.append(Problem(exc.reason, f"GPU {index} could not be opened: {exc}"))
                self._schedule_reinit(device_only=True)
        return gpus

    def _describe(self, index: int) -> Gpu:
        h = self._lib.handle(index)
        uuid = self._lib.uuid(h)
        gpu = Gpu(index, uuid, h, (str(index), uuid, self._hostname))
        gpu.model = self._optional(gpu, "name", self._lib.name, "")
        gpu.pci_bus_id = self._optional(gpu, "pci_info", self._lib.pci_bus_id, "")
        gpu.mig_mode = _MIG.get(self._optional(gpu, "mig_mode", self._lib.mig_mode, -1), "unsupported")
        gpu.links = self._discover_links(gpu)
        return gpu

    def _optional(self, gpu: Gpu, field: str, call: Callable[[Any], Any], default: Any) -> Any:
        value = self._read(gpu, field, call)
        return default if value is None else value

    def _discover_links(self, gpu: Gpu) -> list[int]:
        links, last_error = [], None
        for link in range(nv.NVLINK_MAX_LINKS):
            try:
                self._lib.nvlink_active(gpu.handle, link)
            except NvmlError as exc:
                if exc.scope in (ErrorScope.DEVICE, ErrorScope.LIBRARY):
                    raise
                last_error = exc
                continue
            links.append(link)
        if not links and last_error is not None:
            self._mark_unsupported(gpu, "nvlink", last_error)
        return links

    def _start_xid_watcher(self) -> None:
        assert self._xid is not None
        try:
            unsupported = self._xid.start({gpu.uuid: gpu.handle for gpu in self._gpus})
        except NvmlError as exc:
            if exc.scope is ErrorScope.FIELD:
                # No event support on this node: say so per GPU and stop asking until re-initialised.
                self._xid_unavailable = True
                for gpu in self._gpus:
                    self._mark_unsupported(gpu, "xid_events", exc)
            else:
                self._problems.append(Problem("xid_watcher", f"XID events unavailable: {exc}"))
            return
        for gpu in self._gpus:
            self._support.setdefault(gpu.uuid, {})["xid_events"] = gpu.uuid not in unsupported

    # --- one cycle -------------------------------------------------------------------------------
    def collect(self) -> Collection:
        self._problems = []
        try:
            if self._reinit_due is not None and self._monotonic() >= self._reinit_due:
                self._initialise()
            elif self._xid is not None and not self._xid_unavailable and not self._xid.running:
                self._start_xid_watcher()
            samples: list[Sample] = []
            for gpu in self._gpus:
                self._collect_gpu(gpu, samples)
        except NvmlError as exc:
            if exc.scope is ErrorScope.LIBRARY or not self._gpus:
                raise self._library_error(exc) from None
            raise
        for gpu in self._lost.values():
            samples += self._identity(gpu)
        samples += self._xid_samples()
        return Collection(samples, self._problems)

    def _collect_gpu(self, gpu: Gpu, out: list[Sample]) -> None:
        readings: list[Sample] = []
        try:
            self._read_gpu(gpu, readings)
        except NvmlError as exc:
            if exc.scope is ErrorScope.LIBRARY:
                raise
            # GpuIsLost, ResetRequired, GpuNotFound: this GPU is down, the others carry on.
            gpu.up = False
            self._schedule_reinit(device_only=True)
            self._problems.append(Problem(exc.reason, f"GPU {gpu.index} ({gpu.uuid}): {exc}"))
            readings = []
        else:
            gpu.up = True
        out += self._identity(gpu)
        out += readings
        out += self._support_samples(gpu)

    def _identity(self, gpu: Gpu) -> list[Sample]:
        info = (*gpu.labels, gpu.model, gpu.pci_bus_id, self._driver, gpu.mig_mode)
        return [Sample(c.GPU_INFO, info, 1), Sample(c.GPU_UP, gpu.labels, 1 if gpu.up else 0)]

    def _support_samples(self, gpu: Gpu) -> list[Sample]:
        return [
            Sample(c.GPU_FIELD_SUPPORTED, (*gpu.labels, field), 0)
            for field, ok in sorted(self._support.get(gpu.uuid, {}).items())
            if not ok  # a supported field shows in its own series: only the missing ones are listed
        ]

    def _read_gpu(self, gpu: Gpu, out: list[Sample]) -> None:
        g = gpu.labels
        mem = self._memory(gpu)
        if mem is not None:
            out += [
                Sample(c.MEMORY_USED, g, mem.used),
                Sample(c.MEMORY_FREE, g, mem.free),
                Sample(c.MEMORY_TOTAL, g, mem.total),
            ]
            if mem.reserved is not None:
                out.append(Sample(c.MEMORY_RESERVED, g, mem.reserved))
        util = self._read(gpu, "utilization", self._lib.utilization)
        if util is not None:
            out += [Sample(c.UTILIZATION, g, util[0]), Sample(c.MEMORY_UTILIZATION, g, util[1])]
        if mem is not None and self.history is not None:
            # The 1 s memory curve: what a 15-30 s scrape of the gauge above would miss.
            self.history.record_gpu(
                g,
                self._monotonic(),
                used=mem.used,
                capacity=mem.used + mem.free,
                total=mem.total,
                utilization=None if util is None else util[0],
            )
        for spec, field, call in (
            (c.TEMPERATURE, "temperature", self._lib.temperature_celsius),
            (c.POWER, "power", self._lib.power_watts),
            (c.POWER_LIMIT, "power_limit", self._lib.power_limit_watts),
            (c.ENERGY, "energy", self._lib.energy_joules),
            (c.PCIE_REPLAY, "pcie_replay", self._lib.pcie_replay_counter),
        ):
            value = self._read(gpu, field, call)
            if value is not None:
                out.append(Sample(spec, g, value))
        self._read_clocks(gpu, out)
        self._read_memory_health(gpu, out)
        self._read_nvlinks(gpu, out)
        self._read_processes(gpu, out)

    def _memory(self, gpu: Gpu) -> nv.MemoryInfo | None:
        if gpu.uuid not in self._v1_memory:
            try:
                info = self._lib.memory_info(gpu.handle, v2=True)
            except NvmlError as exc:
                if exc.scope is ErrorScope.TRANSIENT:
                    self._problems.append(Problem(exc.reason, f"GPU {gpu.index} memory: {exc}"))
                    return None
                if exc.scope is not ErrorScope.FIELD:
                    raise
                # Drivers before the v2 call: fall back to v1, which has no reserved figure.
                self._v1_memory.add(gpu.uuid)
            else:
                self._support.setdefault(gpu.uuid, {})["memory"] = True
                return info
        info_v1: nv.MemoryInfo | None = self._read(
            gpu, "memory", functools.partial(self._lib.memory_info, v2=False)
        )
        return info_v1

    def _read_clocks(self, gpu: Gpu, out: list[Sample]) -> None:
        for clock, field, clock_id in (
            ("sm", "clock_sm", nv.CLOCK_SM),
            ("memory", "clock_memory", nv.CLOCK_MEM),
        ):
            hz = self._read(gpu, field, functools.partial(self._lib.clock_hertz, clock=clock_id))
            if hz is not None:
                out.append(Sample(c.CLOCK, (*gpu.labels, clock), hz))
        reasons = self._read(gpu, "clock_event_reasons", self._lib.clock_event_reasons)
        if reasons is not None:
            out += [
                Sample(c.CLOCK_EVENT, (*gpu.labels, name), 1 if reasons & bit else 0)
                for name, bit in nv.CLOCK_EVENT_REASONS
            ]

    def _read_memory_health(self, gpu: Gpu, out: list[Sample]) -> None:
        g = gpu.labels
        ecc = self._read(gpu, "ecc", lambda h: [self._lib.ecc_errors(h, e, s) for *_, e, s in _ECC])
        if ecc is not None:
            out += [
                Sample(c.ECC_ERRORS, (*g, kind, scope), n)
                for (kind, scope, *_), n in zip(_ECC, ecc, strict=True)
            ]
        retired = self._read(
            gpu,
            "retired_pages",
            lambda h: (
                self._lib.retired_pages(h, nv.RETIRE_SBE),
                self._lib.retired_pages(h, nv.RETIRE_DBE),
                self._lib.retired_pages_pending(h),
            ),
        )
        if retired is not None:
            out += [
                Sample(c.RETIRED_PAGES, (*g, "single_bit_ecc"), retired[0]),
                Sample(c.RETIRED_PAGES, (*g, "double_bit_ecc"), retired[1]),
                Sample(c.RETIRED_PAGES_PENDING, g, 1 if retired[2] else 0),
            ]
        rows = self._read(gpu, "remapped_rows", self._lib.remapped_rows)
        if rows is not None:
            out += [
                Sample(c.REMAPPED_ROWS, (*g, "correctable"), rows[0]),
                Sample(c.REMAPPED_ROWS, (*g, "uncorrectable"), rows[1]),
                Sample(c.REMAPPED_ROWS_PENDING, g, 1 if rows[2] else 0),
                Sample(c.REMAPPED_ROWS_FAILED, g, 1 if rows[3] else 0),
            ]

    def _read_nvlinks(self, gpu: Gpu, out: list[Sample]) -> None:
        readings = []
        for link in gpu.links:
            active = self._read(gpu, "nvlink", functools.partial(self._lib.nvlink_active, link=link))
            if active is None:
                continue
            errors = {}
            for kind, counter in _NVLINK_COUNTERS if active else ():  # an inactive link counts nothing
                value = self._read(
                    gpu,
                    f"nvlink_{kind}",
                    functools.partial(self._lib.nvlink_error_counter, link=link, counter=counter),
                )
                if value is not None:
                    errors[kind] = value
            readings.append(LinkReading(link, bool(active), errors))
        out += self._nvlinks.samples(gpu.labels, gpu.uuid, readings)

    def _read_processes(self, gpu: Gpu, out: list[Sample]) -> None:
        processes = self._read(gpu, "processes", self._lib.compute_processes)
        if processes is None:
            return
        self.directory.set_processes(gpu.uuid, frozenset(p.pid for p in processes))
        out.append(Sample(c.PROCESSES, gpu.labels, len(processes)))
        seen = set()
        for p in processes:
            if p.used_bytes is not None and p.pid not in seen:  # NVML can list a PID twice (MIG)
                seen.add(p.pid)
                labels = (*gpu.labels, str(p.pid))
                out.append(Sample(c.PROCESS_MEMORY, labels, p.used_bytes))
                if self.history is not None:
                    self.history.record_process(labels, self._monotonic(), used=p.used_bytes)

    def _xid_samples(self) -> list[Sample]:
        if self._xid is None:
            return []
        labels = {gpu.uuid: gpu.labels for gpu in (*self._gpus, *self._lost.values())}
        samples = []
        for (uuid, xid), (count, last_seen) in sorted(self._xid.counts().items()):
            g = labels.get(uuid, ("", uuid, self._hostname))
            samples += [
                Sample(c.XID_ERRORS, (*g, str(xid)), count),
                Sample(c.XID_LAST_SEEN, (*g, str(xid)), last_seen),
            ]
        return samples

    # --- one field -------------------------------------------------------------------------------
    def _read(self, gpu: Gpu, field: str, call: Callable[[Any], Any]) -> Any:
        support = self._support.setdefault(gpu.uuid, {})
        if support.get(field) is False:
            return None
        try:
            value = call(gpu.handle)
        except NvmlError as exc:
            if exc.scope is ErrorScope.FIELD:
                self._mark_unsupported(gpu, field, exc)
                return None
            if exc.scope is ErrorScope.TRANSIENT:
                self._problems.append(Problem(exc.reason, f"GPU {gpu.index} {field}: {exc}"))
                return None
            raise
        support[field] = True
        return value

    def _mark_unsupported(self, gpu: Gpu, field: str, exc: NvmlError) -> None:
        # Reported once per field and GPU; the field is not asked for again until restart.
        self._support.setdefault(gpu.uuid, {})[field] = False
        log.info(
            "GPU %d (%s): field %s unavailable (%s); its series are omitted",
            gpu.index,
            gpu.uuid,
            field,
            exc.reason,
        )
