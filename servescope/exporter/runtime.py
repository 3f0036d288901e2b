"""Assembles sources, runners and the publisher from settings; starts and stops them together."""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest

from servescope.core import catalog
from servescope.core.dcgm.counters import CounterField, load_counters, specs_of
from servescope.exporter.dcgm.dmon_source import DmonSource
from servescope.exporter.dcgm.exporter_source import DcgmExporterSource
from servescope.exporter.dcgm.supervisor import spawn_process
from servescope.exporter.derived.engine_signals import AdvisorConfig
from servescope.exporter.derived.source import DerivedSource
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.k8s.pod_labels import pod_labels_source
from servescope.exporter.k8s.source import PodResourcesSource
from servescope.exporter.nvml.collector import NvmlSource
from servescope.exporter.nvml.library import NvmlLibrary
from servescope.exporter.nvml.mig import mig_slices
from servescope.exporter.publisher import Publisher
from servescope.exporter.runner import SourceRunner
from servescope.exporter.settings import DerivedSettings, Settings
from servescope.exporter.sources.base import Source
from servescope.exporter.stores.history import MemoryHistory
from servescope.exporter.stores.nvlink import NvlinkLinks
from servescope.exporter.stores.pod_revisions import PodRevisions
from servescope.exporter.stores.serving_board import ServingBoard
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.scrape import Scraper
from servescope.exporter.vllm.source import VllmSource

log = logging.getLogger(__name__)
# SIGTERM must end the exporter within 2 s (the HTTP side takes part of it): a cycle still waiting on a
# peer after this is abandoned, its source closed under it.
STOP_BUDGET_SECONDS = 0.5


def process_families() -> Any:
    """process_* series of this exporter (RSS, CPU), rendered with the publisher's output."""
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)

    def render() -> str:
        return generate_latest(registry).decode()

    return render


class Companion(Protocol):
    """Something that lives as long as the runtime: started before the sources, stopped after them."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass
class Runtime:
    publisher: Publisher
    runners: list[SourceRunner] = field(default_factory=list)
    started: bool = False
    # True when the data is not a real node's (`serve --simulate`): said on every page and series.
    simulated: bool = False
    companions: list[Companion] = field(default_factory=list)
    history: MemoryHistory = field(default_factory=MemoryHistory)
    board: ServingBoard = field(default_factory=ServingBoard)
    nvlinks: NvlinkLinks = field(default_factory=NvlinkLinks)  # per link, for the GPU API
    derived: DerivedSource | None = None
    # API refusals by (route, reason): counted by the app, exported by the derived source.
    api_rejections: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, source: Source) -> SourceRunner:
        runner = SourceRunner(source, self.publisher)
        self.runners.append(runner)
        return runner

    def start(self) -> None:
        for companion in self.companions:
            companion.start()
        for runner in self.runners:
            runner.start()
        self.started = True

    def stop(self, budget_seconds: float = STOP_BUDGET_SECONDS) -> None:
        """Stop every source; cycles in progress share `budget_seconds` to finish, then are left."""
        deadline = time.monotonic() + budget_seconds
        for runner in self.runners:
            runner.signal_stop()
        for runner in self.runners:
            runner.stop(max(0.0, deadline - time.monotonic()))
        for companion in reversed(self.companions):
            companion.stop()
        self.started = False

    def readiness(self) -> tuple[bool, dict[str, dict[str, Any]]]:
        """Ready when every source has succeeded once and none is older than 3 intervals."""
        now = time.monotonic()
        report: dict[str, dict[str, Any]] = {}
        for runner in self.runners:
            h = runner.health
            ok, why = h.readiness(now)
            age = None if h.last_success_mono is None else round(now - h.last_success_mono, 3)
            report[h.name] = {
                "ready": ok,
                "up": h.up,
                "detail": why,
                "last_success_age_seconds": age,
                "interval_seconds": h.interval_seconds,
            }
        return all(entry["ready"] for entry in report.values()), report


@dataclass(frozen=True)
class Hardware:
    """How the sources reach the node: the real NVML binding and `dcgmi` unless told otherwise (the
    simulator plugs in here, through the same interfaces the real ones use)."""

    nvml: NvmlLibrary | None = None
    dcgmi: str | None = None
    spawn: Any = spawn_process
    simulated: bool = False
    # Command-line patterns of engine API servers discovery probes besides vLLM's, SGLang's and TGI's
    # (--engine-process adds to them): the simulator's engines name themselves here.
    engine_processes: tuple[str, ...] = ()


def build_runtime(settings: Settings, hardware: Hardware | None = None) -> Runtime:
    """Wire sources from settings; raises CountersError for a bad counters file (before anything starts)."""
    hardware = hardware or Hardware()
    counters = load_counters(settings.dcgm.counters or None) if settings.dcgm.enabled else []
    runtime = _empty_runtime(settings, hardware.simulated, counters)
    hostname = settings.node.resolved_hostname()
    directory = GpuDirectory()
    lib = (hardware.nvml or NvmlLibrary()) if settings.nvml.enabled else None
    if lib is not None:
        runtime.add(_nvml_source(settings, lib, hostname, directory, runtime))
    if settings.dcgm.enabled:
        runtime.add(_dcgm_source(settings, hardware, counters, hostname, directory))
    pod_resources = _pod_resources_source(settings, lib, hostname, directory)
    revisions = PodRevisions()
    if pod_resources is not None:
        runtime.add(pod_resources)
    if settings.k8s.pod_labels and pod_resources is not None:
        runtime.add(pod_labels_source(settings.k8s, hostname, revisions))
    elif settings.k8s.pod_labels:
        log.warning("--pod-labels without the kubelet's pod-resources socket: no engine's pod, no revision")
    runtime.add(_vllm_source(settings, directory, runtime, hardware.engine_processes, revisions))
    runtime.derived = _derived_source(settings.derived, runtime)
    runtime.add(runtime.derived)
    return runtime


def _nvml_source(
    settings: Settings, lib: NvmlLibrary, hostname: str, directory: GpuDirectory, runtime: Runtime
) -> NvmlSource:
    """The GPUs through NVML, recording into the runtime's memory history and NVLink store."""
    nvml = settings.nvml
    return NvmlSource(
        lib,
        hostname=hostname,
        interval_seconds=nvml.interval_seconds,
        xid_events=nvml.xid_events,
        nvlink_per_link=nvml.nvlink_per_link,
        link_store=runtime.nvlinks,
        directory=directory,
        history=runtime.history,
    )


def _vllm_source(
    settings: Settings,
    directory: GpuDirectory,
    runtime: Runtime,
    engine_processes: tuple[str, ...],
    revisions: PodRevisions,
) -> VllmSource:
    """The engines, configured or discovered, recording into the runtime's serving board."""
    vllm = settings.vllm
    return VllmSource(
        vllm.urls,
        directory=directory,
        procfs=ProcFs(vllm.procfs),
        scraper=Scraper(vllm.timeout_seconds, vllm.max_bytes),
        interval_seconds=vllm.interval_seconds,
        passthrough=vllm.passthrough,
        passthrough_families=vllm.passthrough_families,
        limits=vllm.limits(),
        discovery=vllm.discovery,
        engine_patterns=[*engine_processes, *vllm.engine_processes],
        board=runtime.board,
        revisions=revisions,
    )


def _empty_runtime(settings: Settings, simulated: bool, counters: list[CounterField]) -> Runtime:
    """A runtime with its publisher and stores, before any source is added."""
    publisher = Publisher(
        simulated=simulated,
        extra=[process_families()],
        catalog=[*catalog.CATALOG, *specs_of(counters)],
    )
    derived = settings.derived
    board = ServingBoard(
        derived.retention_seconds,
        settings.vllm.interval_seconds,
        derived.advisor_latency,
        derived.advisor_window_seconds,
    )
    return Runtime(
        publisher, simulated=simulated, history=MemoryHistory(derived.retention_seconds), board=board
    )


def _derived_source(derived: DerivedSettings, runtime: Runtime) -> DerivedSource:
    """The derived signals over what the runtime's NVML and vLLM sources record."""
    advisor = AdvisorConfig(
        slo_seconds=derived.advisor_slo_seconds,
        low_utilisation=derived.advisor_low_utilisation,
        max_num_seqs=derived.advisor_max_num_seqs,
        max_seqs=derived.advisor_max_seqs,
        window_seconds=derived.advisor_window_seconds,
    )
    return DerivedSource(
        runtime.history,
        runtime.board,
        interval_seconds=derived.interval_seconds,
        peak_window_seconds=derived.peak_window_seconds,
        advisor=advisor,
        api_rejections=runtime.api_rejections,
    )


def _dcgm_source(
    settings: Settings, hardware: Hardware, counters: list[Any], hostname: str, directory: GpuDirectory
) -> Any:
    dcgm = settings.dcgm
    if dcgm.exporter_url:
        return DcgmExporterSource(
            dcgm.exporter_url,
            counters,
            hostname=hostname,
            directory=directory,
            interval_seconds=max(dcgm.interval_seconds, 1.0),
        )
    return DmonSource(
        counters,
        dcgmi=dcgm.dcgmi or hardware.dcgmi or "dcgmi",
        host=dcgm.host,
        hostname=hostname,
        directory=directory,
        interval_seconds=dcgm.interval_seconds,
        na_rows=dcgm.na_rows,
        spawn=hardware.spawn,
    )


def _pod_resources_source(
    settings: Settings, lib: NvmlLibrary | None, hostname: str, directory: GpuDirectory
) -> PodResourcesSource | None:
    """GPU -> pod attribution; off (logged) when the kubelet's default socket is not mounted."""
    k8s = settings.k8s
    if not Path(k8s.pod_resources_socket).exists() and not k8s.socket_chosen():
        log.info(
            "no kubelet pod-resources socket at %s: GPU -> pod attribution off", k8s.pod_resources_socket
        )
        return None
    return PodResourcesSource(
        k8s.pod_resources_socket,
        directory=directory,
        hostname=hostname,
        mig_slices=functools.partial(mig_slices, lib) if lib is not None else dict,
        interval_seconds=k8s.pod_resources_interval_seconds,
    )
