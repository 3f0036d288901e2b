"""The vLLM source over real HTTP: each failure gets its reason, and one dead endpoint hurts no other."""

from __future__ import annotations

import gzip
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servescope.core import catalog as c
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.scrape import Scraper
from servescope.exporter.vllm.source import VllmSource
from tests.helpers import SAMPLES, values
from tests.support.http_fakes import QuietHandler, loopback_http

GOOD = (SAMPLES / "vllm-0.32-cpu-idle.txt").read_bytes()
# The slow engine answers long after the scrape's deadline, which leaves the good endpoint beside it
# room to answer on a busy machine.
SLOW_ANSWER_S, SCRAPE_TIMEOUT_S = 20.0, 4.0


class Handler(QuietHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, method: str) -> None:
        path = self.path.strip("/").split("/")[0]
        if path == "slow":
            time.sleep(SLOW_ANSWER_S)
            return self._send(GOOD)
        if path == "error":
            return self._send(b"internal error", status=500)
        if path == "huge":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            chunk = b"x" * (1024 * 1024)
            try:
                for _ in range(100):  # 100 MiB, never all sent: the client stops at its cap
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return None
        if path == "garbage":
            return self._send(bytes(range(256)) * 64)
        if path == "truncated":
            self.send_response(200)
            self.send_header("Content-Length", str(len(GOOD)))
            self.end_headers()
            self.wfile.write(GOOD[: len(GOOD) // 2])
            self.close_connection = True
            return None
        if path == "cut":
            return self._send(GOOD[: GOOD.index(b"vllm:kv_cache_usage_perc{") + 30])
        if path == "gzip":
            return self._send(gzip.compress(GOOD), headers={"Content-Encoding": "gzip"})
        if path == "v1":
            return self._send(GOOD, content_type="text/plain; version=1.0.0; charset=utf-8")
        return self._send(GOOD)

    def _send(
        self,
        body: bytes,
        status: int = 200,
        headers: dict[str, str] | None = None,
        content_type: str = "text/plain; version=0.0.4; charset=utf-8",
    ) -> None:
        self.reply(status, body, content_type, headers)


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with loopback_http(Handler) as url:
        yield url


def refused_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/metrics"


def source_for(urls: list[str], tmp_path: Path, *, passthrough: bool = False) -> VllmSource:
    return VllmSource(
        urls,
        directory=GpuDirectory(),
        procfs=ProcFs(tmp_path),
        scraper=Scraper(timeout=SCRAPE_TIMEOUT_S),
        passthrough=passthrough,
    )


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("slow", "timeout"),
        ("error", "http_status"),
        ("huge", "too_large"),
        ("garbage", "parse"),
        ("truncated", "connect"),
        ("cut", "parse"),
        ("refused", "connect"),
    ],
)
def test_each_failure_has_its_reason_and_the_good_endpoint_is_unaffected(
    base: str, tmp_path: Path, path: str, reason: str
) -> None:
    bad = refused_url() if path == "refused" else f"{base}/{path}/metrics"
    good = f"{base}/ok/metrics"
    source = source_for([bad, good], tmp_path, passthrough=True)
    try:
        collection = source.collect()
    finally:
        source.close()
    samples = collection.samples
    assert values(samples, "servescope_source_up", source="vllm", endpoint=bad) == [0]
    assert values(samples, "servescope_source_errors_total", endpoint=bad, reason=reason) == [1]
    assert values(samples, "servescope_source_up", source="vllm", endpoint=good) == [1]
    assert values(samples, c.PROMPT_TOKENS.name, endpoint=good, model_name="tiny-llm") == [712]
    assert not values(samples, c.PROMPT_TOKENS.name, endpoint=bad)  # nothing stale or fake for it
    assert collection.raw is not None and f'endpoint="{bad}"' not in collection.raw


@pytest.mark.parametrize("path", ["gzip", "v1"])
def test_gzip_and_both_content_types(base: str, tmp_path: Path, path: str) -> None:
    url = f"{base}/{path}/metrics"
    source = source_for([url], tmp_path)
    try:
        samples = source.collect().samples
    finally:
        source.close()
    assert values(samples, c.GENERATION_TOKENS.name, endpoint=url) == [1794]
    assert values(samples, c.SERVING_ENGINE_INFO.name, endpoint=url, backend="vllm", generation="0.11+") == [
        1
    ]


def test_normalised_histograms_and_passthrough(base: str, tmp_path: Path) -> None:
    url = f"{base}/ok/metrics"
    source = source_for([url], tmp_path, passthrough=True)
    try:
        collection = source.collect()
    finally:
        source.close()
    buckets = [s for s in collection.samples if s.spec is c.TTFT and s.suffix == "_bucket"]
    assert buckets[-1].label_values[-1] == "+Inf" and buckets[-1].value == 30
    assert any(s.label_values[-1] == "0.5" for s in buckets)
    assert collection.raw is not None
    assert (
        f'vllm:num_requests_running{{engine="0",model_name="tiny-llm",endpoint="{url}"}} 0' in collection.raw
    )
    assert "_created" not in collection.raw and "python_gc" not in collection.raw
