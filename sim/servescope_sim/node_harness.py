"""A simulated node on a fake clock: the production NVML, vLLM-parsing and derived code paths, no threads.

GPUs come from the simulator's pynvml-shaped module; engines are in-process SimulatedEngines whose
/metrics text goes through the real parser and normaliser into the serving board (only HTTP and the
/proc join are skipped: each engine is told which GPUs it serves). One hour of simulated time runs in a
few seconds. The tests and the benchmarks share it: `nvml_stack` (NVML only), `scrape_engine` (one
engine's page into a board) and `simulated_node` (both, with derived signals and a scenario).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servescope.core.exposition import parse_exposition
from servescope.core.vllm.aliases import is_engine_family
from servescope.exporter.derived.source import DerivedSource
from servescope.exporter.exposition import Sample
from servescope.exporter.nvml.collector import NvmlSource
from servescope.exporter.nvml.library import NvmlLibrary
from servescope.exporter.stores.history import MemoryHistory
from servescope.exporter.stores.nvlink import NvlinkLinks
from servescope.exporter.stores.serving_board import ServingBoard
from servescope.exporter.stores.signals import GpuProcess
from servescope.exporter.vllm.normalise import normalise
from servescope_sim.clock import FakeClock
from servescope_sim.fleet import SimulatedFleet
from servescope_sim.pynvml_module import SimulatedPynvml
from servescope_sim.registry import make_scenario
from servescope_sim.scenarios import EngineLoad, Scenario
from servescope_sim.vllm_engine import EngineConfig, SimulatedEngine
from servescope_sim.vllm_metrics import render_metrics

VLLM_INTERVAL = 5.0


def nvml_stack(
    gpus: int = 4,
    *,
    model: str = "H200",
    xid_events: bool = False,
    nvlinks: int | None = None,
    nvlink_per_link: bool = False,
    link_store: NvlinkLinks | None = None,
) -> tuple[SimulatedFleet, NvmlSource, FakeClock]:
    """The production collector and wrapper over the simulator's pynvml-shaped module."""
    clock = FakeClock()
    fleet = SimulatedFleet(gpus, model, seed=7, clock=clock, nvlinks=nvlinks)
    source = NvmlSource(
        NvmlLibrary(SimulatedPynvml(fleet)),
        hostname="node-a",
        xid_events=xid_events,
        nvlink_per_link=nvlink_per_link,
        link_store=link_store,
        wall=lambda: 1.7e9 + clock.now,
        monotonic=clock,
    )
    return fleet, source, clock


def scrape_engine(
    board: ServingBoard, url: str, engine: SimulatedEngine, gpus: list[GpuProcess], now: float
) -> None:
    """Record `engine`'s /metrics page, parsed and normalised as the exporter's vLLM source does, in
    `board` at `now`, for the GPUs it serves."""
    families = list(parse_exposition(render_metrics(engine), keep=is_engine_family))
    board.record(url, normalise(families), gpus, now)


@dataclass
class NodeEngine:
    engine: SimulatedEngine
    url: str
    gpus: list[int]
    load: EngineLoad | None = None


@dataclass
class SimulatedNode:
    fleet: SimulatedFleet
    clock: FakeClock
    history: MemoryHistory
    board: ServingBoard
    derived: DerivedSource
    nvml: NvmlSource
    scenario: Scenario | None
    engines: list[NodeEngine] = field(default_factory=list)
    start: float = 0.0
    last: list[Sample] = field(default_factory=list)

    @property
    def elapsed(self) -> float:
        return self.clock.now - self.start

    def run(self, seconds: float) -> list[Sample]:
        """Advance second by second: NVML every 1 s, engines every 5 s, derived every 5 s."""
        for _ in range(round(seconds)):
            self.clock.advance(1.0)
            t = self.elapsed
            if self.scenario is not None:
                self.scenario.apply(self.fleet, t)
            self.nvml.collect()
            if round(t) % VLLM_INTERVAL == 0:
                self._scrape_engines(t)
                self.last = self.derived.collect().samples
        return self.last

    def _scrape_engines(self, t: float) -> None:
        for node_engine in self.engines:
            engine = node_engine.engine
            if self.scenario is not None:
                load = self.scenario.engine_load(t)
                if load != node_engine.load:
                    engine.set_load(
                        arrival_rate=load.arrival_rate,
                        concurrency=load.concurrency,
                        prompt_tokens=load.prompt_tokens,
                        output_tokens=load.output_tokens,
                    )
                    node_engine.load = load
            gpus = [
                GpuProcess(str(i), self.fleet.gpus[i].uuid, self.fleet.gpus[i].worker_pid)
                for i in node_engine.gpus
            ]
            # The engine's own clock is the node's elapsed time; the board's is the node's clock.
            engine.advance_to(t)
            scrape_engine(self.board, node_engine.url, engine, gpus, self.clock.now)


def simulated_node(
    scenario: str | None = None,
    *,
    gpus: int = 2,
    engines: int = 1,
    engine_config: EngineConfig | None = None,
    **scenario_args: float,
) -> SimulatedNode:
    fleet, nvml, clock = nvml_stack(gpus)
    history = MemoryHistory(3600.0)
    board = ServingBoard(3600.0, VLLM_INTERVAL)
    nvml.history = history
    derived = DerivedSource(history, board, monotonic=clock)
    node = SimulatedNode(
        fleet,
        clock,
        history,
        board,
        derived,
        nvml,
        make_scenario(scenario, **scenario_args) if scenario else None,  # type: ignore[arg-type]
        start=clock.now,
    )
    size = gpus // engines if engines else 0
    for i in range(engines):
        group = list(range(i * size, (i + 1) * size))
        engine = SimulatedEngine(engine_config, seed=100 + i, model_name="sim-llm", engine_id="0")
        node.engines.append(NodeEngine(engine, f"http://127.0.0.1:{8000 + i}/metrics", group))
    return node
