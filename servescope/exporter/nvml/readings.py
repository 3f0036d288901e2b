"""What one cycle reads from one GPU, field by field: a field NVML does not support is asked for no more."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from servescope.core import catalog as c
from servescope.exporter.exposition import Sample
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.nvml import library as nv
from servescope.exporter.nvml.device import Gpu
from servescope.exporter.nvml.errors import ErrorScope, NvmlError
from servescope.exporter.nvml.library import NvmlLibrary
from servescope.exporter.nvml.nvlink import LinkReading, NvlinkSeries
from servescope.exporter.nvml.pcie_link import pcie_link_samples
from servescope.exporter.sources.base import Problem
from servescope.exporter.stores.history import MemoryHistory

log = logging.getLogger(__name__)

_NVLINK_COUNTERS = (
    ("crc_flit", nv.NVLINK_CRC_FLIT),
    ("crc_data", nv.NVLINK_CRC_DATA),
    ("replay", nv.NVLINK_REPLAY),
    ("recovery", nv.NVLINK_RECOVERY),
)
NVLINK_KINDS = tuple(kind for kind, _ in _NVLINK_COUNTERS)
_ECC = (
    ("corrected", "volatile", nv.ECC_CORRECTED, nv.ECC_VOLATILE),
    ("uncorrected", "volatile", nv.ECC_UNCORRECTED, nv.ECC_VOLATILE),
    ("corrected", "aggregate", nv.ECC_CORRECTED, nv.ECC_AGGREGATE),
    ("uncorrected", "aggregate", nv.ECC_UNCORRECTED, nv.ECC_AGGREGATE),
)


class GpuReader:
    """Reads each GPU's fields; remembers per GPU which fields are supported, and the cycle's problems."""

    def __init__(
        self,
        lib: NvmlLibrary,
        *,
        monotonic: Callable[[], float],
        directory: GpuDirectory,
        history: MemoryHistory | None,
        nvlinks: NvlinkSeries,
    ) -> None:
        self.history = history
        self._nvlinks = nvlinks
        self.directory = directory
        self.support: dict[str, dict[str, bool]] = {}  # uuid -> field -> supported
        self.problems: list[Problem] = []
        self._lib = lib
        self._monotonic = monotonic
        self._v1_memory: set[str] = set()

    def support_samples(self, gpu: Gpu) -> list[Sample]:
        return [
            Sample(c.GPU_FIELD_SUPPORTED, (*gpu.labels, field), 0)
            for field, ok in sorted(self.support.get(gpu.uuid, {}).items())
            if not ok  # a supported field shows in its own series: only the missing ones are listed
        ]

    def read_gpu(self, gpu: Gpu, out: list[Sample]) -> None:
        g = gpu.labels
        self._read_memory_and_utilization(gpu, out)
        for spec, field, call in (
            (c.TEMPERATURE, "temperature", self._lib.temperature_celsius),
            (c.POWER, "power", self._lib.power_watts),
            (c.POWER_LIMIT, "power_limit", self._lib.power_limit_watts),
            (c.ENERGY, "energy", self._lib.energy_joules),
            (c.PCIE_REPLAY, "pcie_replay", self._lib.pcie_replay_counter),
        ):
            value = self.read(gpu, field, call)
            if value is not None:
                out.append(Sample(spec, g, value))
        link = self.read(gpu, "pcie_link", self._lib.pcie_link)
        if link is not None:
            out += pcie_link_samples(g, link)
        self._read_clocks(gpu, out)
        self._read_memory_health(gpu, out)
        self._read_nvlinks(gpu, out)
        self._read_processes(gpu, out)

    def _read_memory_and_utilization(self, gpu: Gpu, out: list[Sample]) -> None:
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
        util = self.read(gpu, "utilization", self._lib.utilization)
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

    def _memory(self, gpu: Gpu) -> nv.MemoryInfo | None:
        if gpu.uuid not in self._v1_memory:
            try:
                info = self._lib.memory_info(gpu.handle, v2=True)
            except NvmlError as exc:
                if exc.scope is ErrorScope.TRANSIENT:
                    self.problems.append(Problem(exc.reason, f"GPU {gpu.index} memory: {exc}"))
                    return None
                if exc.scope is not ErrorScope.FIELD:
                    raise
                # Drivers before the v2 call: fall back to v1, which has no reserved figure.
                self._v1_memory.add(gpu.uuid)
            else:
                self.support.setdefault(gpu.uuid, {})["memory"] = True
                return info
        info_v1: nv.MemoryInfo | None = self.read(
            gpu, "memory", functools.partial(self._lib.memory_info, v2=False)
        )
        return info_v1

    def _read_clocks(self, gpu: Gpu, out: list[Sample]) -> None:
        for clock, field, clock_id in (
            ("sm", "clock_sm", nv.CLOCK_SM),
            ("memory", "clock_memory", nv.CLOCK_MEM),
        ):
            hz = self.read(gpu, field, functools.partial(self._lib.clock_hertz, clock=clock_id))
            if hz is not None:
                out.append(Sample(c.CLOCK, (*gpu.labels, clock), hz))
        reasons = self.read(gpu, "clock_event_reasons", self._lib.clock_event_reasons)
        if reasons is not None:
            out += [
                Sample(c.CLOCK_EVENT, (*gpu.labels, name), 1 if reasons & bit else 0)
                for name, bit in nv.CLOCK_EVENT_REASONS
            ]

    def _read_memory_health(self, gpu: Gpu, out: list[Sample]) -> None:
        g = gpu.labels
        ecc = self.read(gpu, "ecc", lambda h: [self._lib.ecc_errors(h, e, s) for *_, e, s in _ECC])
        if ecc is not None:
            out += [
                Sample(c.ECC_ERRORS, (*g, kind, scope), n)
                for (kind, scope, *_), n in zip(_ECC, ecc, strict=True)
            ]
        retired = self.read(
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
        rows = self.read(gpu, "remapped_rows", self._lib.remapped_rows)
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
            active = self.read(gpu, "nvlink", functools.partial(self._lib.nvlink_active, link=link))
            if active is None:
                continue
            errors = {}
            for kind, counter in _NVLINK_COUNTERS if active else ():  # an inactive link counts nothing
                value = self.read(
                    gpu,
                    f"nvlink_{kind}",
                    functools.partial(self._lib.nvlink_error_counter, link=link, counter=counter),
                )
                if value is not None:
                    errors[kind] = value
            readings.append(LinkReading(link, bool(active), errors))
        out += self._nvlinks.samples(gpu.labels, gpu.uuid, readings)

    def _read_processes(self, gpu: Gpu, out: list[Sample]) -> None:
        processes = self.read(gpu, "processes", self._lib.compute_processes)
        if processes is None:
            return
        self.directory.set_processes(gpu.uuid, frozenset(p.pid for p in processes))
        out.append(Sample(c.PROCESSES, gpu.labels, len(processes)))
        seen = set()
        pod = self.directory.sole_holder((gpu.uuid,))
        for p in processes:
            if p.used_bytes is not None and p.pid not in seen:  # NVML can list a PID twice (MIG)
                seen.add(p.pid)
                labels = (*gpu.labels, str(p.pid))
                out.append(Sample(c.PROCESS_MEMORY, (*labels, *pod), p.used_bytes))
                if self.history is not None:
                    self.history.record_process(labels, self._monotonic(), used=p.used_bytes)

    def read(self, gpu: Gpu, field: str, call: Callable[[Any], Any]) -> Any:
        support = self.support.setdefault(gpu.uuid, {})
        if support.get(field) is False:
            return None
        try:
            value = call(gpu.handle)
        except NvmlError as exc:
            if exc.scope is ErrorScope.FIELD:
                self.mark_unsupported(gpu, field, exc)
                return None
            if exc.scope is ErrorScope.TRANSIENT:
                self.problems.append(Problem(exc.reason, f"GPU {gpu.index} {field}: {exc}"))
                return None
            raise
        support[field] = True
        return value

    def mark_unsupported(self, gpu: Gpu, field: str, exc: NvmlError) -> None:
        # Reported once per field and GPU; the field is not asked for again until restart.
        self.support.setdefault(gpu.uuid, {})[field] = False
        log.info(
            "GPU %d (%s): field %s unavailable (%s); its series are omitted",
            gpu.index,
            gpu.uuid,
            field,
            exc.reason,
        )
