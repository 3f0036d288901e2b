"""The simulated node's stand-ins for the machine: a fake clock, /proc, the scraper, the XID wall clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.scrape import ScrapeError
from servescope.sim.pynvml_module import SimulatedPynvml
from servescope.sim.scenarios import EngineLoad
from servescope.sim.vllm_engine import SimulatedEngine

from .engine_text import EngineText

HOSTNAME = "node-a"
CLOCK_START = 1000.0
FIRST_PORT = 8000
FIRST_PID = 52_000
# The XID watcher waits 500 ms of real time for an event; re-initialising NVML (every 30 simulated
# seconds while a GPU is lost) joins that thread, so on a fast clock the wait would dominate.
XID_WAIT_MS = 5
XID_SETTLE_SECONDS = 5.0
LATENCY_HISTOGRAMS = {"ttft": "time_to_first_token_seconds", "e2e": "e2e_request_latency_seconds"}


class FakeClock:
    """A monotonic clock that only moves when told to."""

    def __init__(self, start: float = CLOCK_START) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class BoundedWaitPynvml(SimulatedPynvml):
    """The simulator's NVML, whose event wait gives up after a few real milliseconds."""

    def nvmlEventSetWait_v2(self, event_set: int, timeout_ms: int) -> Any:  # noqa: N802 (pynvml's name)
        return super().nvmlEventSetWait_v2(event_set, min(timeout_ms, XID_WAIT_MS))


@dataclass
class NodeEngine:
    """One in-process engine, the GPUs it serves from, and the process that would hold its port."""

    index: int
    engine: SimulatedEngine
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


class EngineProcs(ProcFs):
    """/proc as the engine-GPU join reads it: each live engine's PID listens on its port, no children."""

    def __init__(self, engines: list[NodeEngine]) -> None:
        super().__init__()
        self._engines = engines

    def pids(self) -> list[int]:
        return [e.pid for e in self._engines if e.alive]

    def children(self) -> dict[int, list[int]]:
        return {}

    def listening_pids(self, port: int) -> set[int]:
        return {e.pid for e in self._engines if e.alive and e.port == port}


class EngineScraper:
    """Stands in for the HTTP scraper: a live engine answers its /metrics text, a down one 503."""

    def __init__(self, engines: list[NodeEngine]) -> None:
        self._by_url = {e.url: e for e in engines}
        self._text = {e.url: EngineText() for e in engines}

    def fetch(self, url: str) -> str:
        node_engine = self._by_url.get(url)
        if node_engine is None or not node_engine.alive:
            raise ScrapeError("connect", f"{url}: connection refused")
        if node_engine.engine.down:
            raise ScrapeError("http_status", f"{url} answered HTTP 503")
        return self._text[url].render(node_engine.engine)

    def close(self) -> None:
        pass


class CountingWall:
    """The wall clock handed to the XID watcher; counts its calls, one per XID event recorded."""

    def __init__(self, clock: FakeClock, wall_start: float) -> None:
        self._clock, self._wall_start = clock, wall_start
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        return self.wall()

    def wall(self) -> float:
        return self._wall_start + self._clock.now - CLOCK_START
