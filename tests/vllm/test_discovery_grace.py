"""A discovered engine that dies is reported down for a grace period, then forgotten.

Without the grace period, the next discovery (a minute later, or at once when NVML's process list
changes) would drop the dead endpoint with its series, and ServescopeServingEndpointDown could never
fire for a discovered engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.vllm import finding
from servescope.exporter.vllm.discovery import Discovery
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.scrape import ScrapeError
from servescope.exporter.vllm.source import DISCOVERY_GRACE_SECONDS, DISCOVERY_SECONDS, VllmSource
from tests.helpers import SAMPLES, FakeClock, values

GOOD = (SAMPLES / "vllm-0.32-cpu-idle.txt").read_text()
URL = "http://127.0.0.1:8000/metrics"


class Engine:
    """The engine behind URL, as the scraper sees it: alive, or refusing connections."""

    def __init__(self) -> None:
        self.alive = True

    def fetch(self, url: str) -> str:
        if url != URL or not self.alive:
            raise ScrapeError("connect", f"{url}: connection refused")
        return GOOD

    def close(self) -> None:
        pass


@dataclass
class Node:
    """The source with discovery on, a fake engine and the URLs discovery finds, on fake clocks."""

    source: VllmSource
    engine: Engine
    listening: list[str]
    clocks: tuple[FakeClock, FakeClock]

    def advance(self, seconds: float) -> None:
        for clock in self.clocks:
            clock.advance(seconds)

    def up(self) -> list[float]:
        return values(self.source.collect().samples, "servescope_source_up", source="vllm", endpoint=URL)


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    listening = [URL]
    monkeypatch.setattr(
        finding, "discover", lambda *args: Discovery(owners={url: set() for url in listening})
    )
    engine, mono, wall = Engine(), FakeClock(), FakeClock(1.7e9)
    source = VllmSource(
        [],
        directory=GpuDirectory(),
        procfs=ProcFs(tmp_path),
        scraper=engine,  # type: ignore[arg-type]
        monotonic=mono,
        wall=wall,
    )
    yield Node(source, engine, listening, (mono, wall))
    source.close()


def test_a_dead_engine_is_down_for_the_grace_period_then_forgotten(node: Node) -> None:
    assert node.up() == [1]
    node.engine.alive, node.listening[:] = False, []  # the process is gone: discovery no longer finds it
    node.advance(DISCOVERY_SECONDS + 1)
    samples = node.source.collect().samples
    assert values(samples, "servescope_source_up", source="vllm", endpoint=URL) == [0]
    assert values(samples, "servescope_source_errors_total", endpoint=URL, reason="connect") == [1]
    node.advance(DISCOVERY_GRACE_SECONDS)
    assert node.source.endpoints() == []
    assert node.up() == []


def test_an_engine_that_comes_back_in_the_grace_period_recovers(node: Node) -> None:
    node.up()
    node.engine.alive, node.listening[:] = False, []
    node.advance(DISCOVERY_SECONDS + 1)
    assert node.up() == [0]
    node.engine.alive, node.listening[:] = True, [URL]  # restarted on the same port
    node.advance(DISCOVERY_SECONDS + 1)
    assert node.up() == [1]
