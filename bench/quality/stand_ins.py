"""Stand-ins for the machine around the exporter: NVML's bounded event wait, /proc, scraping, the wall.

They speak what the exporter's code expects (pynvml's calls, /proc's answers, the scraper's errors), so
the sources run unchanged on the benchmark's in-process node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.scrape import ScrapeError
from servescope_sim.clock import CLOCK_START, FakeClock
from servescope_sim.pynvml_module import SimulatedPynvml
from servescope_sim.vllm_metrics import MetricsText

from .sglang_text import SglangText

if TYPE_CHECKING:
    from .node import NodeEngine

# The XID watcher waits 500 ms of real time for an event; re-initialising NVML (every 30 simulated
# seconds while a GPU is lost) joins that thread, so on a fast clock the wait would dominate.
XID_WAIT_MS = 5


class BoundedWaitPynvml(SimulatedPynvml):
    """The simulator's NVML, whose event wait gives up after a few real milliseconds."""

    def nvmlEventSetWait_v2(self, event_set: int, timeout_ms: int) -> Any:  # noqa: N802 (pynvml's name)
        return super().nvmlEventSetWait_v2(event_set, min(timeout_ms, XID_WAIT_MS))


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

    def __init__(self, engines: list[NodeEngine], sglang: tuple[int, ...] = ()) -> None:
        self._by_url = {e.url: e for e in engines}
        self._text = {e.url: SglangText() if e.index in sglang else MetricsText() for e in engines}

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
