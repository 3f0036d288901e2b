"""A cycle waits at most one interval: a scrape still running is reported timing out, not asked again."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.source import VllmSource
from tests.helpers import SAMPLES, values

GOOD = (SAMPLES / "vllm-0.32-cpu-idle.txt").read_text()
STUCK, FINE = "http://stuck/metrics", "http://fine/metrics"


class StuckFetcher:
    """Answers FINE at once; STUCK only once `release` is set (a parse or peer that overruns)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = {STUCK: 0, FINE: 0}

    def fetch(self, url: str) -> str:
        self.calls[url] += 1
        if url == STUCK:
            self.release.wait(10)
        return GOOD

    def close(self) -> None:
        self.release.set()


def test_a_scrape_overrunning_the_interval_is_timeout_and_not_resubmitted(tmp_path: Path) -> None:
    fetcher = StuckFetcher()
    source = VllmSource(
        [STUCK, FINE],
        directory=GpuDirectory(),
        procfs=ProcFs(tmp_path),
        scraper=fetcher,
        interval_seconds=0.5,
    )
    try:
        for cycle in range(1, 3):
            started = time.monotonic()
            samples = source.collect().samples
            assert time.monotonic() - started < 1.5
            assert values(samples, "servescope_source_up", endpoint=FINE) == [1]
            assert values(samples, "servescope_source_up", endpoint=STUCK) == [0]
            assert values(samples, "servescope_source_errors_total", endpoint=STUCK, reason="timeout") == [
                cycle
            ]
        assert fetcher.calls == {STUCK: 1, FINE: 2}  # the stuck one was not asked a second time
        fetcher.release.set()
        time.sleep(0.1)
        samples = source.collect().samples  # returned: asked again, and up with the fresh answer
        assert values(samples, "servescope_source_up", endpoint=STUCK) == [1]
        assert fetcher.calls[STUCK] == 2
    finally:
        source.close()
