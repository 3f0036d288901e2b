"""GET /api/v1/gpus, /api/v1/gpus/{gpu}/memory and .../memory.svg on the real app."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from servescope.exporter.app import create_app
from servescope.exporter.memory_api import ApiError, parse_window
from servescope.exporter.runtime import Runtime
from servescope.exporter.serve import SimulationSettings
from servescope.exporter.settings import DcgmSettings, Settings, VllmSettings
from servescope_sim.wiring import simulated_runtime

MIB = 1024**2
GIB = 1024**3
GPU = ("0", "GPU-aaaa", "node-a")


@pytest.fixture
def runtime() -> Runtime:
    settings = Settings(dcgm=DcgmSettings(enabled=False), vllm=VllmSettings(discovery=False))
    runtime = simulated_runtime(settings, SimulationSettings(enabled=True, gpus=1))
    # Twelve minutes of a 40 MiB/min leak, recorded as the NVML source would (monotonic seconds).
    now = time.monotonic()
    for age in range(720, 0, -1):
        used = 100 * GIB + (720 - age) * 40 * MIB / 60
        runtime.history.record_gpu(
            GPU, now - age, used=used, capacity=140 * GIB, total=141 * GIB, utilization=0.6
        )
        runtime.history.record_process((*GPU, "4242"), now - age, used=used - GIB)
    return runtime


@pytest.fixture
def client(runtime: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(runtime, manage_runtime=False)) as client:
        yield client


def test_memory_json_has_samples_trend_and_verdict(client: TestClient) -> None:
    body = client.get("/api/v1/gpus/0/memory", params={"window": "10m"}).json()
    assert body["uuid"] == "GPU-aaaa"
    assert body["window_seconds"] == 600
    assert 598 <= len(body["samples"]) <= 600
    wall, used = body["samples"][-1]
    assert abs(wall - time.time()) < 5  # timestamps are Unix seconds
    assert body["growth_bytes_per_second"]["5m"] == pytest.approx(40 * MIB / 60, rel=0.01)
    assert "30m" not in body["growth_bytes_per_second"]  # 12 min of history do not cover half of 30 min
    assert body["seconds_to_exhaustion"]["5m"] == pytest.approx(
        (140 * GIB - used) / (40 * MIB / 60), rel=0.01
    )
    assert body["leak"]["suspected"] is True
    assert "MiB/min" in body["leak"]["reason"]
    assert body["processes"][0]["pid"] == 4242
    # By UUID too.
    assert client.get("/api/v1/gpus/GPU-aaaa/memory").json()["gpu"] == "0"


def test_gpus_summary(client: TestClient) -> None:
    (gpu,) = client.get("/api/v1/gpus").json()["gpus"]
    assert gpu["hostname"] == "node-a"
    assert gpu["history_seconds"] == pytest.approx(719)


def test_svg_is_a_document_with_curve_trend_and_capacity(client: TestClient) -> None:
    response = client.get("/api/v1/gpus/0/memory.svg")
    assert response.headers["content-type"] == "image/svg+xml"
    root = ET.fromstring(response.text)
    classes = {el.get("class") for el in root.iter()}
    assert {"memory", "trend", "capacity"} <= classes
    note = next(el.text or "" for el in root.iter() if el.get("class") == "note")
    assert "+40.0 MiB/min, full in" in note
    assert "LEAK SUSPECTED" in note


@pytest.mark.parametrize(
    ("path", "status", "reason"),
    [
        ("/api/v1/gpus/9/memory", 404, "unknown_gpu"),
        ("/api/v1/gpus/0/memory?window=ten", 400, "bad_window"),
        ("/api/v1/gpus/0/memory?window=5s", 400, "bad_window"),
        ("/api/v1/gpus/0/memory.svg?window=2h", 400, "bad_window"),
    ],
)
def test_bad_requests_are_refused_clearly_and_counted(
    client: TestClient, runtime: Runtime, path: str, status: int, reason: str
) -> None:
    response = client.get(path)
    assert response.status_code == status
    assert response.json()["error"]
    assert sum(n for (_, r), n in runtime.api_rejections.items() if r == reason) == 1
    assert runtime.derived is not None
    exported = [
        s
        for s in runtime.derived.collect().samples
        if s.spec.name == "servescope_api_rejected_requests_total"
    ]
    assert [s.label_values[1] for s in exported] == [reason]


def test_parse_window() -> None:
    assert parse_window("10m", 3600) == 600
    assert parse_window("90s", 3600) == 90
    assert parse_window("1h", 3600) == 3600
    assert parse_window("120", 3600) == 120
    with pytest.raises(ApiError, match="between 10s and the retention"):
        parse_window("2h", 3600)
    with pytest.raises(ApiError, match="expected a duration"):
        parse_window("$(reboot)", 3600)


def test_requests_reuse_the_sources_trend_report(
    client: TestClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert client.get("/api/v1/gpus").status_code == 200  # no report yet: computed once
    assert runtime.derived is not None

    def refit(*_: object) -> None:
        raise AssertionError("a request refitted the trend")

    monkeypatch.setattr(runtime.derived, "trend", refit)
    assert client.get("/api/v1/gpus/0/memory").json()["leak"]["suspected"] is True
    assert client.get("/api/v1/gpus/0/memory.svg").status_code == 200
