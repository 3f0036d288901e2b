"""M4: engines sending more than the cap at once (no length, endless chunks, a gzip bomb), beside the
largest page accepted, keep the exporter's memory within the DaemonSet limit with 25 % to spare."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from servescope.deploy.exporter import EXPORTER_MEMORY_LIMIT
from servescope.exporter.vllm.scrape import DEFAULT_MAX_BYTES
from tests.faults.exporter import exporter, series
from tests.faults.peers import (
    endless_chunked,
    gzip_bomb,
    healthy,
    largest_page,
    no_length,
    rss_peak_mib,
    serve,
)
from tests.support import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
INTERVAL_S = 10


def limit_mib(quantity: str) -> float:
    assert quantity.endswith("Mi"), f"memory limit {quantity!r} is not in Mi"
    return float(quantity.removesuffix("Mi"))


def test_bodies_over_the_cap_are_cut_while_streaming_and_memory_stays_in_the_limit(tmp_path: Path) -> None:
    with (
        serve(healthy) as good,
        serve(largest_page(DEFAULT_MAX_BYTES - 4096)) as big,
        serve(no_length) as unsized,
        serve(endless_chunked) as chunked,
        serve(gzip_bomb) as bomb,
    ):
        hostile = [unsized, chunked, bomb]
        urls = [arg for peer in [good, big, *hostile] for arg in ("--vllm-url", peer.url)]
        # A deadline long enough for the largest page to wait its turn (one large body at a time) on a
        # busy machine: the hostile bodies must be refused for their size, never for the time taken.
        args = ("--no-nvml", "--no-dcgm", "--vllm-interval", str(INTERVAL_S), "--vllm-timeout", "9", *urls)
        with exporter(*args, log=tmp_path / "log") as served:

            def worst_case_seen() -> str | None:
                text = served.get("/metrics").text
                refused = [
                    series(text, "servescope_source_errors_total", endpoint=peer.url, reason="too_large")
                    for peer in hostile
                ]
                accepted = series(text, "servescope_source_up", source="vllm", endpoint=big.url) == [1]
                return text if accepted and all(n and n[0] >= 1 for n in refused) else None

            wait_for("the largest page accepted and every hostile one refused", worst_case_seen, 90, 1.0)
            time.sleep(2 * INTERVAL_S)  # two more cycles with every hostile engine at once
            text = served.get("/metrics").text
            peak = rss_peak_mib(served.process.pid)
    limit = limit_mib(EXPORTER_MEMORY_LIMIT)
    print(f"RSS peak {peak:.0f} MiB; DaemonSet limit {limit:.0f} MiB")
    assert series(text, "servescope_serving_prompt_tokens_total", endpoint=good.url) == [712]
    for peer in hostile:
        assert series(text, "servescope_source_up", source="vllm", endpoint=peer.url) == [0]
        assert not series(text, "servescope_serving_prompt_tokens_total", endpoint=peer.url)
    assert peak <= 0.75 * limit, f"RSS peaked at {peak:.0f} MiB, over 75 % of the {limit:.0f} MiB limit"
