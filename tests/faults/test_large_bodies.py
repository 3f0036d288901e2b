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

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


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
        with exporter(
            "--no-nvml", "--no-dcgm", "--vllm-interval", "3", *urls, log=tmp_path / "log"
        ) as served:
            time.sleep(10)  # three cycles, each with every hostile engine at once
            text = served.get("/metrics").text
            peak = rss_peak_mib(served.process.pid)
    limit = limit_mib(EXPORTER_MEMORY_LIMIT)
    print(f"RSS peak {peak:.0f} MiB; DaemonSet limit {limit:.0f} MiB")
    assert series(text, "servescope_serving_prompt_tokens_total", endpoint=good.url) == [712]
    assert series(text, "servescope_source_up", source="vllm", endpoint=big.url) == [1]
    for peer in hostile:
        assert series(text, "servescope_source_up", source="vllm", endpoint=peer.url) == [0]
        (refused,) = series(text, "servescope_source_errors_total", endpoint=peer.url, reason="too_large")
        # One waiting for the large-body slot while another page parses may run out of time instead.
        waited = sum(series(text, "servescope_source_errors_total", endpoint=peer.url, reason="timeout"))
        assert refused >= 1 and refused + waited >= 2, (
            f"{peer.url}: {refused:.0f} too_large, {waited:.0f} timeout"
        )
    assert peak <= 0.75 * limit, f"RSS peaked at {peak:.0f} MiB, over 75 % of the {limit:.0f} MiB limit"
