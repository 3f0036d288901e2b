"""Source isolation, readiness, and a scrape that never waits for a collection."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from servescope.core import catalog as c
from servescope.exporter.app import create_app
from servescope.exporter.exposition import Sample
from servescope.exporter.publisher import Publisher
from servescope.exporter.runtime import Runtime
from servescope.exporter.sources.base import Collection, Problem
from tests.support import free_port, generous, wait_for


class BlockingSource:
    """Collects once, then every later collect blocks until released (a hung driver call)."""

    name = "blocky"

    def __init__(self, interval: float) -> None:
        self.interval_seconds = interval
        self.calls = 0
        self.returned = 0
        self.release = threading.Event()

    def collect(self) -> Collection:
        self.calls += 1
        if self.calls > 1:
            self.release.wait(120)
        self.returned += 1
        return Collection([Sample(c.GPU_UP, ("0", "GPU-blocky", "h"), 1)])

    def close(self) -> None:
        self.release.set()


class CrashingSource:
    name = "crashy"
    interval_seconds = 0.05

    def collect(self) -> Collection:
        raise RuntimeError("bug in a source")

    def close(self) -> None:
        pass


class PartialSource:
    name = "partial"
    interval_seconds = 0.05

    def collect(self) -> Collection:
        return Collection(
            [Sample(c.TEMPERATURE, ("1", "GPU-p", "h"), 40)], [Problem("gpu_lost", "GPU 0 is lost")]
        )

    def close(self) -> None:
        pass


@pytest.fixture
def served() -> Iterator[tuple[str, Runtime, BlockingSource]]:
    runtime = Runtime(Publisher())
    blocking = BlockingSource(interval=0.1)
    runtime.add(blocking)
    runtime.add(CrashingSource())
    runtime.add(PartialSource())
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(runtime), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    try:
        yield base, runtime, blocking
    finally:
        blocking.release.set()
        server.should_exit = True
        thread.join(10)


@pytest.mark.e2e
def test_scrape_answers_from_the_previous_snapshot_while_a_source_is_blocked(
    served: tuple[str, Runtime, BlockingSource],
) -> None:
    # What a scrape costs is bench/scrape.py's to measure; here, that no scrape waits for a collection:
    # every one is answered while the source's second collect is still hung (it returns only at the
    # end of the test, or after 120 s).
    base, _, blocking = served
    with httpx.Client(base_url=base, timeout=60) as client:
        wait_for("the second collection to hang", lambda: blocking.calls >= 2, generous(5), every=0.01)
        time.sleep(0.5)  # > 3 intervals of 0.1 s: the source is now stale
        for _ in range(20):
            response = client.get("/metrics")
            assert response.status_code == 200
        assert (blocking.calls, blocking.returned) == (2, 1), "a scrape waited for the hung collection"
        text = response.text
        assert 'servescope_gpu_up{gpu="0",uuid="GPU-blocky",hostname="h"} 1' in text
        ready = client.get("/readyz")
        assert ready.status_code == 503
        body = ready.json()
        assert body["ready"] is False
        assert body["failing"]["blocky"].startswith("stale: last success")
        assert body["sources"]["partial"]["ready"] is True


@pytest.mark.e2e
def test_one_crashing_source_never_fails_the_scrape_and_is_counted(
    served: tuple[str, Runtime, BlockingSource],
) -> None:
    base, _, _ = served
    time.sleep(0.3)
    text = httpx.get(f"{base}/metrics").text
    assert 'servescope_source_up{source="crashy"} 0' in text
    assert 'servescope_source_errors_total{source="crashy",reason="unexpected"}' in text
    assert 'servescope_source_up{source="partial"} 1' in text
    assert 'servescope_source_errors_total{source="partial",reason="gpu_lost"}' in text
    assert 'servescope_gpu_temperature_celsius{gpu="1",uuid="GPU-p",hostname="h"} 40' in text
    ready = httpx.get(f"{base}/readyz").json()
    assert ready["failing"]["crashy"] == "never succeeded: unexpected: RuntimeError: bug in a source"
    assert httpx.get(f"{base}/healthz").json() == {"status": "alive"}


@pytest.mark.e2e
def test_gzip_is_served_when_asked(served: tuple[str, Runtime, BlockingSource]) -> None:
    base, _, _ = served
    response = httpx.get(f"{base}/metrics", headers={"Accept-Encoding": "gzip"})
    assert response.headers["content-encoding"] == "gzip"
    assert "servescope_build_info" in response.text  # httpx decompresses
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")


def test_a_source_emitting_an_uncatalogued_metric_is_refused_loudly() -> None:
    publisher = Publisher(catalog=[c.GPU_UP])
    with pytest.raises(ValueError, match="missing from the catalog"):
        from servescope.exporter.sources.health import SourceHealth

        publisher.register(SourceHealth("x", 1.0))
        publisher.publish("x", [Sample(c.TEMPERATURE, ("0", "u", "h"), 1)])
