"""A simulated node on a fake clock, exported through the production sources, runners and publisher.

What runs unchanged: the NVML collector over the simulator's pynvml-shaped module, the vLLM source
(parser, normaliser, series export, engine-GPU join, endpoint health), the derived source, the source
runners and the publisher that renders `/metrics`. What stands in for the machine: a clock that only
moves when told to, a scraper that renders in-process engines instead of fetching over HTTP, and a
/proc that says which engine process listens on which port.

Cadence: NVML is read every `nvml_interval` simulated seconds (its 1 s production default would
triple the cost for no difference in any alert), and the vLLM and derived sources run at every
Prometheus scrape. The derived source refits its trends every 30 s whatever its cycle, so its values at
a scrape are those a 5 s cycle would have served; the vLLM source records one engine sample per scrape
instead of six, which only thins the serving history the leak verdict and the KV trend read.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from servescope.exporter.derived.source import DerivedSource
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.nvml.collector import NvmlSource
from servescope.exporter.nvml.library import NvmlLibrary
from servescope.exporter.publisher import Publisher
from servescope.exporter.runner import SourceRunner
from servescope.exporter.sources.base import SourceError
from servescope.exporter.stores.history import MemoryHistory
from servescope.exporter.stores.serving_board import ServingBoard
from servescope.exporter.vllm.source import VllmSource
from servescope_sim.clock import CLOCK_START, FakeClock
from servescope_sim.fleet import SimulatedFleet
from servescope_sim.scenarios import EngineLoad, Scenario
from servescope_sim.vllm_engine import EngineConfig

from .faults import FaultableEngine, NodeFaults
from .hardware import Hardware
from .sglang_text import use_sglang_buckets
from .stand_ins import BoundedWaitPynvml, CountingWall, EngineProcs, EngineScraper

HOSTNAME = "node-a"
FIRST_PORT = 8000
FIRST_PID = 52_000
XID_SETTLE_SECONDS = 5.0
LATENCY_HISTOGRAMS = {"ttft": "time_to_first_token_seconds", "e2e": "e2e_request_latency_seconds"}


@dataclass
class NodeEngine:
    """One in-process engine, the GPUs it serves from, and the process that would hold its port."""

    index: int
    engine: FaultableEngine
    gpus: tuple[int, ...]
    alive: bool = True
    died_at: float | None = None
    load: EngineLoad | None = None

    @property
    def port(self) -> int:
        return FIRST_PORT + self.index

    @property
    def pid(self) -> int:
        return FIRST_PID + 100 * self.index

    @property
    def url(self) -> str:
        return engine_url(self.index)


def engine_url(index: int) -> str:
    """The /metrics URL of engine `index`: the `endpoint` label of its series."""
    return f"http://127.0.0.1:{FIRST_PORT + index}/metrics"


@dataclass(frozen=True)
class Timing:
    nvml_interval: float = 5.0
    scrape_interval: float = 30.0


@dataclass
class Truth:
    """Ground truth sampled at every NVML tick: noise-free GPU busyness and each engine's KV usage.

    A GPU's busyness is the load it carries (the fleet's load trend, without NVML's per-step noise), 0
    once its engine is gone, None once the GPU is lost; an engine's KV usage is None while down or dead.
    """

    times: list[float] = field(default_factory=list)
    gpu_busy: list[list[float | None]] = field(default_factory=list)
    engine_kv: list[list[float | None]] = field(default_factory=list)
    # Per engine, the cumulative bucket counts of its TTFT and e2e histograms (None: down or dead).
    latency: dict[str, list[list[tuple[int, ...] | None]]] = field(default_factory=dict)
    bounds: dict[str, tuple[float, ...]] = field(default_factory=dict)
    oom_at: dict[int, float] = field(default_factory=dict)
    lost_at: dict[int, float] = field(default_factory=dict)


class Node:
    """Steps a fleet and its engines through a scenario and returns the exposition at every scrape."""

    def __init__(
        self,
        scenario: Scenario,
        hardware: Hardware,
        *,
        seed: int,
        wall_start: float,
        engine_config: EngineConfig,
        timing: Timing | None = None,
        hostname: str = HOSTNAME,
        publisher: Publisher | None = None,
    ) -> None:
        self.scenario, self.timing, self.hostname = scenario, timing or Timing(), hostname
        self._given_publisher = publisher
        self.clock = FakeClock()
        self.wall = CountingWall(self.clock, wall_start)
        self.fleet = SimulatedFleet(
            hardware.gpus, hardware.gpu_model, seed=seed, clock=self.clock, nvlinks=hardware.nvlinks
        )
        self.engines = [
            NodeEngine(i, FaultableEngine(engine_config, seed=seed * 100 + i, wall_start=wall_start), group)
            for i, group in enumerate(hardware.layout)
        ]
        for e in self.engines:
            for index in e.gpus:
                # NVML lists the engine's PID on its GPUs: the join finds the GPUs from the port's PID.
                self.fleet.assign_process(index, e.pid)
        self.truth = Truth()
        self.faults = scenario if isinstance(scenario, NodeFaults) else None
        self._sglang = () if self.faults is None else self.faults.sglang_engines
        for index in self._sglang:
            use_sglang_buckets(self.engines[index].engine)
        self._xid_events = hardware.xid_events
        self._start_exporter()
        self._xids_seen = 0

    def _start_exporter(self) -> None:
        self.publisher = self._given_publisher or Publisher(simulated=True)
        self.runners = [
            SourceRunner(source, self.publisher, monotonic=self.clock, wall=self.wall.wall)
            for source in self._sources(self._xid_events)
        ]

    def restart_exporter(self) -> None:
        """A new exporter process (a rollout): its sources start again with empty history."""
        self.close()
        self._start_exporter()

    def _sources(self, xid_events: bool) -> tuple[NvmlSource, VllmSource, DerivedSource]:
        """The exporter's three sources, wired as the runtime wires them, on this node's clocks."""
        timing = self.timing
        history = MemoryHistory(3600.0)
        board = ServingBoard(3600.0, timing.scrape_interval)
        self.pynvml = BoundedWaitPynvml(self.fleet)
        self.nvml = NvmlSource(
            NvmlLibrary(self.pynvml),
            hostname=self.hostname,
            interval_seconds=timing.nvml_interval,
            xid_events=xid_events,
            wall=self.wall,
            monotonic=self.clock,
            directory=GpuDirectory(),
            history=history,
        )
        vllm = VllmSource(
            [e.url for e in self.engines],
            directory=self.nvml.directory,
            procfs=EngineProcs(self.engines),
            scraper=EngineScraper(self.engines, self._sglang),
            interval_seconds=timing.scrape_interval,
            passthrough=False,  # the engines' own families: no rule reads them
            discovery=False,
            board=board,
            monotonic=self.clock,
            wall=self.wall.wall,
        )
        derived = DerivedSource(history, board, interval_seconds=timing.scrape_interval, monotonic=self.clock)
        return self.nvml, vllm, derived

    @property
    def elapsed(self) -> float:
        return self.clock.now - CLOCK_START

    def run(self, duration: float, on_scrape: Callable[[float, str], None]) -> None:
        """Advance to `duration` simulated seconds; `on_scrape(t, body)` gets each scrape's exposition."""
        step = self.timing.nvml_interval
        ticks_per_scrape = round(self.timing.scrape_interval / step)
        tick = 0
        while self.elapsed < duration:
            self.clock.advance(step)
            tick += 1
            t = self.elapsed
            self.scenario.apply(self.fleet, t)
            self._settle_xids()
            self.fleet.advance()
            self._engines_follow(t)
            faults = self.faults
            if faults is not None:
                self.pynvml.pcie_trained_width = faults.pcie_widths(t)
                if faults.rollout_at is not None and t - step < faults.rollout_at <= t:
                    self.restart_exporter()
            hung = faults is not None and faults.source_hung(t)  # stuck in a call: it does nothing
            if tick % ticks_per_scrape == 0:
                for runner in self.runners:
                    if not (hung and runner.source is self.nvml):
                        runner.run_once()
                on_scrape(t, self.publisher.current.body.decode())
            elif not hung:
                self._collect_between_scrapes()
            self._record_truth(t)

    def close(self) -> None:
        for runner in self.runners:
            runner.stop()

    def _collect_between_scrapes(self) -> None:
        with contextlib.suppress(SourceError):  # a failure is recorded at the next scrape
            self.nvml.collect()

    def _settle_xids(self) -> None:
        """Wait (real time) until the XID watcher has recorded every queued event: deterministic runs."""
        queued = len(self.fleet.xid_queue)
        if not queued:
            return
        deadline = time.monotonic() + XID_SETTLE_SECONDS
        while (self.fleet.xid_queue or self.wall.calls < self._xids_seen + queued) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.001)
        self._xids_seen = self.wall.calls

    def _engines_follow(self, t: float) -> None:
        """Kill engines whose GPU died (OOM, lost), set each live engine's load, run it up to `t`."""
        loads = self.scenario.engine_loads(t, len(self.engines))
        for e, load in zip(self.engines, loads, strict=True):
            if e.alive and any(self._gpu_dead(i) for i in e.gpus):
                self._kill(e, t)
            if not e.alive:
                continue
            faults = self.faults
            e.engine.kv_floor = None if faults is None else faults.kv_floor(e.index, t)
            if faults is not None and faults.engine_hung(e.index, t):
                continue  # its scheduler stopped: no step, no token; its gauges keep their last values
            if load != e.load:
                e.engine.set_down(load.down)
                # set_load redraws the next arrival: only call it on a change, as the scenario driver does.
                e.engine.set_load(
                    arrival_rate=load.arrival_rate,
                    concurrency=load.concurrency,
                    prompt_tokens=load.prompt_tokens,
                    output_tokens=load.output_tokens,
                )
                e.load = load
            e.engine.advance_to(t)

    def _gpu_dead(self, index: int) -> bool:
        gpu = self.fleet.gpus[index]
        return gpu.lost or gpu.oom_at is not None

    def _kill(self, e: NodeEngine, t: float) -> None:
        # A CUDA OOM or a GPU falling off the bus kills the engine process: its port closes, and every
        # GPU it held is freed (the fleet already freed the one that failed).
        e.alive, e.died_at = False, t
        with self.fleet.lock:
            for index in e.gpus:
                self.fleet.gpus[index].serving = False

    def _record_truth(self, t: float) -> None:
        truth = self.truth
        truth.times.append(t)
        busy: list[float | None] = []
        for gpu in self.fleet.gpus:
            if gpu.lost:
                truth.lost_at.setdefault(gpu.index, t)
                busy.append(None)
            else:
                busy.append(gpu.load_trend if gpu.serving else 0.0)
            if gpu.oom_at is not None:
                truth.oom_at.setdefault(gpu.index, gpu.oom_at)
        truth.gpu_busy.append(busy)
        serving = [e.alive and not e.engine.down for e in self.engines]
        truth.engine_kv.append(
            [
                e.engine.real_kv_cache_usage if up else None
                for e, up in zip(self.engines, serving, strict=True)
            ]
        )
        for sli, name in LATENCY_HISTOGRAMS.items():
            counts = []
            for e, up in zip(self.engines, serving, strict=True):
                histogram = e.engine.stats.histograms[name]
                truth.bounds.setdefault(sli, histogram.bounds)
                counts.append(tuple(histogram.counts) if up else None)
            truth.latency.setdefault(sli, []).append(counts)
