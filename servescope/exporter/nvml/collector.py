"""The NVML source: one cycle reads every GPU, tolerating each error class as NVML users learned to."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from servescope.core import catalog as c
from servescope.exporter.exposition import Sample
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.nvml import library as nv
from servescope.exporter.nvml.device import Gpu
from servescope.exporter.nvml.errors import ErrorScope, NvmlError
from servescope.exporter.nvml.library import NvmlLibrary
from servescope.exporter.nvml.nvlink import NvlinkSeries
from servescope.exporter.nvml.readings import NVLINK_KINDS, GpuReader
from servescope.exporter.nvml.xid import XidWatcher
from servescope.exporter.sources.base import Collection, Problem, SourceError
from servescope.exporter.stores.history import MemoryHistory
from servescope.exporter.stores.nvlink import NvlinkLinks

_HINTS = {
    "library_not_found": "libnvidia-ml.so.1 was not found: is the NVIDIA driver installed and visible to "
    "this process (in a container: the NVIDIA container toolkit)? To try servescope without a GPU, "
    "run with --simulate",
    "driver_not_loaded": "the NVIDIA kernel driver is not loaded",
    "lib_rm_version_mismatch": "libnvidia-ml and the kernel driver differ in version (driver upgraded "
    "without a reboot?)",
}
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
        self.directory = directory or GpuDirectory()
        self._lib = lib
        self._hostname = hostname
        self._monotonic = monotonic
        self._xid = XidWatcher(lib, wall) if xid_events else None
        self._initialised = False
        self._reinit_due: float | None = 0.0  # None: no re-initialisation pending
        self._last_init = float("-inf")
        self._driver = ""
        self._gpus: list[Gpu] = []
        self._lost: dict[str, Gpu] = {}  # GPUs seen once and missing now: exported as down, not dropped
        self._xid_unavailable = False
        nvlinks = NvlinkSeries(NVLINK_KINDS, per_link=nvlink_per_link, store=link_store)
        self._reader = GpuReader(
            lib, monotonic=monotonic, directory=self.directory, history=history, nvlinks=nvlinks
        )

    @property
    def history(self) -> MemoryHistory | None:
        """Where the 1 s memory curves go (None: nowhere)."""
        return self._reader.history

    @history.setter
    def history(self, history: MemoryHistory | None) -> None:
        self._reader.history = history

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
        self.close()  # re-initialising starts from a shut-down library and a stopped XID watcher
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
                self._reader.problems.append(Problem(exc.reason, f"GPU {index} could not be opened: {exc}"))
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
        value = self._reader.read(gpu, field, call)
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
            self._reader.mark_unsupported(gpu, "nvlink", last_error)
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
                    self._reader.mark_unsupported(gpu, "xid_events", exc)
            else:
                self._reader.problems.append(Problem("xid_watcher", f"XID events unavailable: {exc}"))
            return
        for gpu in self._gpus:
            self._reader.support.setdefault(gpu.uuid, {})["xid_events"] = gpu.uuid not in unsupported

    # --- one cycle -------------------------------------------------------------------------------
    def collect(self) -> Collection:
        self._reader.problems = []
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
        return Collection(samples, self._reader.problems)

    def _collect_gpu(self, gpu: Gpu, out: list[Sample]) -> None:
        readings: list[Sample] = []
        try:
            self._reader.read_gpu(gpu, readings)
        except NvmlError as exc:
            if exc.scope is ErrorScope.LIBRARY:
                raise
            # GpuIsLost, ResetRequired, GpuNotFound: this GPU is down, the others carry on.
            gpu.up = False
            self._schedule_reinit(device_only=True)
            self._reader.problems.append(Problem(exc.reason, f"GPU {gpu.index} ({gpu.uuid}): {exc}"))
            readings = []
        else:
            gpu.up = True
        out += self._identity(gpu)
        out += readings
        out += self._reader.support_samples(gpu)

    def _identity(self, gpu: Gpu) -> list[Sample]:
        info = (*gpu.labels, gpu.model, gpu.pci_bus_id, self._driver, gpu.mig_mode)
        return [Sample(c.GPU_INFO, info, 1), Sample(c.GPU_UP, gpu.labels, 1 if gpu.up else 0)]

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
