"""Assembles sources, runners and the publisher from settings; starts and stops them together."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest

from . import catalog
from .dcgm.counters import load_counters, specs_of
from .dcgm.dmon_source import DmonSource
from .dcgm.exporter_source import DcgmExporterSource
from .dcgm.supervisor import spawn_process
from .derived.engine_signals import AdvisorConfig
from .derived.history import MemoryHistory
from .derived.serving_board import ServingBoard
from .derived.source import DerivedSource
from .gpu_directory import GpuDirectory
from .nvml.collector import NvmlSource
from .nvml.library import NvmlLibrary
from .publisher import Publisher
from .settings import Settings
from .sim.engines import SimEngine, gpu_groups, start_engines, stop_engines
from .sim.fleet import SimulatedFleet
from .sim.pynvml_module import SimulatedPynvml
from .sim.scenario_driver import ScenarioDriver
from .sim.scenarios import Scenario, make_scenario
from .sources.base import Source
from .sources.runner import SourceRunner
from .vllm.procfs import ProcFs
from .vllm.scrape import Scraper
from .vllm.source import VllmSource

log = logging.getLogger(__name__)


def process_families() -> Any:
    """process_* series of this exporter (RSS, CPU), rendered with the publisher's output."""
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)

    def render() -> str:
        return generate_latest(registry).decode()

    return render


@dataclass
class Runtime:
    publisher: Publisher
    runners: list[SourceRunner] = field(default_factory=list)
    fleet: SimulatedFleet | None = None
    started: bool = False
    sim_engines: int = 0
    seed: int = 1
    engines: list[SimEngine] = field(default_factory=list)
    history: MemoryHistory = field(default_factory=MemoryHistory)
    board: ServingBoard = field(default_factory=ServingBoard)
    derived: DerivedSource | None = None
    scenario: Scenario | None = None
    driver: ScenarioDriver | None = None
    # API refusals by (route, reason): counted by the app, exported by the derived source.
    api_rejections: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, source: Source) -> SourceRunner:
        runner = SourceRunner(source, self.publisher)
        self.runners.append(runner)
        return runner

    def start(self) -> None:
        if self.fleet is not None and self.sim_engines:
            self.engines = start_engines(self.fleet, self.sim_engines, self.seed)
        if self.fleet is not None and self.scenario is not None:
            self.driver = ScenarioDriver(self.scenario, self.fleet, self.engines)
            self.driver.start()
        for runner in self.runners:
            runner.start()
        self.started = True

    def stop(self) -> None:
        if self.driver is not None:
            self.driver.stop()
            self.driver = None
        for runner in self.runners:
            runner.stop()
        stop_engines(self.engines)
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


def fake_dcgmi_path() -> str:
    """The bundled fake, next to this interpreter (a virtualenv's bin/) or on PATH."""
    beside = Path(sys.executable).with_name("servescope-fake-dcgmi")
    return (
        str(beside) if beside.exists() else shutil.which("servescope-fake-dcgmi") or "servescope-fake-dcgmi"
    )


def build_runtime(settings: Settings) -> Runtime:
    """Wire sources from settings; raises CountersError for a bad counters file (before anything starts)."""
    sim = settings.simulator
    counters = load_counters(settings.dcgm.counters or None) if settings.dcgm.enabled else []
    publisher = Publisher(
        simulated=sim.enabled, extra=[process_families()], catalog=[*catalog.CATALOG, *specs_of(counters)]
    )
    derived = settings.derived
    runtime = Runtime(
        publisher,
        history=MemoryHistory(derived.retention_seconds),
        board=ServingBoard(
            derived.retention_seconds,
            settings.vllm.interval_seconds,
            derived.advisor_latency,
            derived.advisor_window_seconds,
        ),
    )
    hostname = settings.node.resolved_hostname()
    directory = GpuDirectory()
    if settings.nvml.enabled:
        if sim.enabled:
            runtime.fleet = SimulatedFleet(
                sim.gpus, sim.gpu_model, sim.seed, nvlinks=None if sim.nvlinks < 0 else sim.nvlinks
            )
            lib = NvmlLibrary(SimulatedPynvml(runtime.fleet))
            if sim.scenario != "none":
                layout = gpu_groups(sim.gpus, sim.engines)
                runtime.scenario = make_scenario(sim.scenario, pace=sim.scenario_pace, layout=layout)
            log.warning(
                "serving a SIMULATED fleet of %d %s GPUs (seed %d): not real data",
                sim.gpus,
                sim.gpu_model,
                sim.seed,
            )
        else:
            lib = NvmlLibrary()
        runtime.add(
            NvmlSource(
                lib,
                hostname=hostname,
                interval_seconds=settings.nvml.interval_seconds,
                xid_events=settings.nvml.xid_events,
                directory=directory,
                history=runtime.history,
            )
        )
    if settings.dcgm.enabled:
        runtime.add(_dcgm_source(settings, counters, hostname, directory))
    vllm = settings.vllm
    runtime.sim_engines, runtime.seed = (sim.engines, sim.seed) if sim.enabled else (0, sim.seed)
    runtime.add(
        VllmSource(
            vllm.urls,
            directory=directory,
            procfs=ProcFs(vllm.procfs),
            scraper=Scraper(vllm.timeout_seconds, vllm.max_bytes),
            interval_seconds=vllm.interval_seconds,
            passthrough=vllm.passthrough,
            discovery=vllm.discovery,
            board=runtime.board,
        )
    )
    runtime.derived = DerivedSource(
        runtime.history,
        runtime.board,
        interval_seconds=derived.interval_seconds,
        peak_window_seconds=derived.peak_window_seconds,
        advisor=AdvisorConfig(
            slo_seconds=derived.advisor_slo_seconds,
            low_utilisation=derived.advisor_low_utilisation,
            max_num_seqs=derived.advisor_max_num_seqs,
            max_seqs=derived.advisor_max_seqs,
            window_seconds=derived.advisor_window_seconds,
        ),
        api_rejections=runtime.api_rejections,
    )
    runtime.add(runtime.derived)
    return runtime


def _dcgm_source(settings: Settings, counters: list[Any], hostname: str, directory: GpuDirectory) -> Any:
    dcgm, sim = settings.dcgm, settings.simulator
    if dcgm.exporter_url:
        return DcgmExporterSource(
            dcgm.exporter_url, counters, hostname=hostname, interval_seconds=max(dcgm.interval_seconds, 1.0)
        )
    spawn: Any = spawn_process
    dcgmi = dcgm.dcgmi or "dcgmi"
    if sim.enabled and not dcgm.dcgmi:
        dcgmi = fake_dcgmi_path()
        env = {
            **os.environ,
            "SERVESCOPE_FAKE_DCGMI_GPUS": str(sim.gpus),
            "SERVESCOPE_FAKE_DCGMI_MODEL": sim.gpu_model,
            "SERVESCOPE_FAKE_DCGMI_SEED": str(sim.seed),
        }
        spawn = functools.partial(spawn_process, env=env)
    return DmonSource(
        counters,
        dcgmi=dcgmi,
        hostname=hostname,
        directory=directory,
        interval_seconds=dcgm.interval_seconds,
        na_rows=dcgm.na_rows,
        spawn=spawn,
    )
