"""A cycle waits at most one interval: a scrape still running is reported timing out, not asked again."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.source import VllmSource
from tests.helpers import SAMPLES, values
from tests.support import generous, wait_for

GOOD = (SAMPLES / "vllm-0.32-cpu-idle.txt").read_text()
STUCK, FINE = "http://stuck/metrics", "http://fine/metrics"
# Long enough for the healthy scrape, parse included, on a busy machine: the cycle's whole budget.
INTERVAL_S = 2.0


class StuckFetcher:
    """Answers FINE at once; STUCK only once `release` is set (a parse or peer that overruns)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = {STUCK: 0, FINE: 0}

    def fetch(self, url: str) -> str:
        self.calls[url] += 1
        if url == STUCK:
            self.release.wait(120)
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
        interval_seconds=INTERVAL_S,
    )
    try:
        for cycle in range(1, 3):
            started = time.monotonic()
            samples = source.collect().samples
            # Without the backstop the cycle would wait for the stuck scrape (two minutes).
            assert time.monotonic() - started < generous(INTERVAL_S)
            assert values(samples, "servescope_source_up", endpoint=FINE) == [1]
            assert values(samples, "servescope_source_up", endpoint=STUCK) == [0]
            assert values(samples, "servescope_source_errors_total", endpoint=STUCK, reason="timeout") == [
                cycle
            ]
        assert fetcher.calls == {STUCK: 1, FINE: 2}  # the stuck one was not asked a second time
        fetcher.release.set()

        def stuck_up_again() -> bool:  # its late answer, or a new one asked once it had returned
            return values(source.collect().samples, "servescope_source_up", endpoint=STUCK) == [1]

        wait_for("the released scrape to be up again", stuck_up_again, generous(INTERVAL_S), every=0.1)
        asked = fetcher.calls[STUCK]
        samples = source.collect().samples  # returned: asked again, and up with the fresh answer
        assert values(samples, "servescope_source_up", endpoint=STUCK) == [1]
        assert fetcher.calls[STUCK] == asked + 1 <= 3
    finally:
        source.close()
