"""M2: a peer trickling one byte every 1.5 s never blanks the healthy engine beside it, nor holds a cycle."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from servescope.core.dcgm.counters import load_counters
from servescope.exporter.dcgm.exporter_source import DcgmExporterSource
from servescope.exporter.sources.base import SourceError
from tests.faults.exporter import exporter, series
from tests.faults.peers import healthy, serve, trickling
from tests.support import generous, wait_for

pytestmark = pytest.mark.e2e


def test_a_trickling_engine_is_down_with_timeout_and_the_healthy_one_is_published(tmp_path: Path) -> None:
    with serve(healthy) as good, serve(trickling) as slow:
        args = ["--no-nvml", "--no-dcgm", "--vllm-url", good.url, "--vllm-url", slow.url]
        # The default --vllm-timeout (2 s) is longer than the trickle's pace: a per-read timeout never fires.
        with exporter(*args, "--vllm-interval", "3", log=tmp_path / "log") as served:
            started = time.monotonic()
            ready = wait_for(
                "/readyz 200", lambda: served.get("/readyz").status_code == 200, generous(15), 0.2
            )
            assert ready
            became_ready = time.monotonic() - started
            for _ in range(2):  # two cycles in a row, while the trickler still lives
                time.sleep(3.0)
                text = served.get("/metrics").text
                assert series(text, "servescope_serving_prompt_tokens_total", endpoint=good.url) == [712]
                assert series(text, "servescope_source_up", source="vllm", endpoint=good.url) == [1]
                assert series(text, "servescope_source_up", source="vllm", endpoint=slow.url) == [0]
                (timeouts,) = series(
                    text, "servescope_source_errors_total", endpoint=slow.url, reason="timeout"
                )
                assert timeouts >= 1
            readiness = served.get("/readyz").json()
            assert readiness["sources"]["vllm"]["ready"] and readiness["ready"]
            print(f"ready {became_ready:.2f} s after start; trickler connections: {slow.connections[0]}")


def test_a_trickling_dcgm_exporter_fails_its_cycle_within_the_deadline() -> None:
    with serve(trickling) as slow:
        source = DcgmExporterSource(slow.url, load_counters(), hostname="node", timeout=2.0)
        try:
            for _ in range(2):
                started = time.monotonic()
                with pytest.raises(SourceError) as failure:
                    source.collect()
                took = time.monotonic() - started
                assert failure.value.reason == "timeout"
                # The trickle would take a day to send its page: the cycle ends at the 2 s deadline.
                assert 1.9 <= took < generous(2.0), f"the scrape took {took:.2f} s for a 2 s deadline"
        finally:
            source.close()
