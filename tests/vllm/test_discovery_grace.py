"""A discovered engine that dies is reported down for a grace period, then forgotten.

Without the grace period, the next discovery (a minute later, or at once when NVML's process list
changes) would drop the dead endpoint with its series, and ServescopeServingEndpointDown could never
fire for a discovered engine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servescope.gpu_directory import GpuDirectory
from servescope.vllm import source as source_module
from servescope.vllm.procfs import ProcFs
from servescope.vllm.scrape import ScrapeError
from servescope.vllm.source import DISCOVERY_GRACE_SECONDS, DISCOVERY_SECONDS, VllmSource
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


def test_a_dead_engine_is_down_for_the_grace_period_then_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listening = [URL]
    monkeypatch.setattr(source_module, "candidate_urls", lambda *args: list(listening))
    engine, mono, wall = Engine(), FakeClock(), FakeClock(1.7e9)
    source = VllmSource(
        [],
        directory=GpuDirectory(),
        procfs=ProcFs(tmp_path),
        scraper=engine,  # type: ignore[arg-type]
        monotonic=mono,
        wall=wall,
    )
    try:
        up = values(source.collect().samples, "servescope_source_up", source="vllm", endpoint=URL)
        assert up == [1]

        engine.alive, listening[:] = False, []  # the process is gone: discovery no longer finds it
        for clock in (mono, wall):
            clock.advance(DISCOVERY_SECONDS + 1)
        samples = source.collect().samples
        assert values(samples, "servescope_source_up", source="vllm", endpoint=URL) == [0]
        assert values(samples, "servescope_source_errors_total", endpoint=URL, reason="connect") == [1]

        for clock in (mono, wall):
            clock.advance(DISCOVERY_GRACE_SECONDS)
        assert source.endpoints() == []
        assert not values(source.collect().samples, "servescope_source_up", source="vllm", endpoint=URL)
    finally:
        source.close()


def test_an_engine_that_comes_back_in_the_grace_period_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listening = [URL]
    monkeypatch.setattr(source_module, "candidate_urls", lambda *args: list(listening))
    engine, mono, wall = Engine(), FakeClock(), FakeClock(1.7e9)
    source = VllmSource(
        [],
        directory=GpuDirectory(),
        procfs=ProcFs(tmp_path),
        scraper=engine,
        monotonic=mono,
        wall=wall,  # type: ignore[arg-type]
    )
    try:
        source.collect()
        engine.alive, listening[:] = False, []
        for clock in (mono, wall):
            clock.advance(DISCOVERY_SECONDS + 1)
        source.collect()
        engine.alive, listening[:] = True, [URL]  # restarted on the same port
        for clock in (mono, wall):
            clock.advance(DISCOVERY_SECONDS + 1)
        up = values(source.collect().samples, "servescope_source_up", source="vllm", endpoint=URL)
        assert up == [1]
    finally:
        source.close()
