"""What the webhook tests share: a fake exporter, a client on a real store, waiting for steps."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from servescope.runbooks.actions import RunContext
from servescope.runbooks.incidents import IncidentStore
from servescope.runbooks.webhook import IncidentRouter, WebhookAuth, incident_router
from tests.runbook.webhook.notices import TOKEN

UUID = "GPU-4f1c2a7e-1d2b-4c3d-8e9f-0a1b2c3d4e5f"
METRICS = f"""# TYPE servescope_gpu_info gauge
servescope_gpu_info{{gpu="0",uuid="{UUID}",hostname="node-a",gpu_model="NVIDIA H100"}} 1
# TYPE servescope_gpu_up gauge
servescope_gpu_up{{gpu="0",uuid="{UUID}"}} 1
# TYPE servescope_gpu_utilization_ratio gauge
servescope_gpu_utilization_ratio{{gpu="0",uuid="{UUID}"}} 0.97
# TYPE servescope_gpu_memory_used_bytes gauge
servescope_gpu_memory_used_bytes{{gpu="0",uuid="{UUID}"}} 6.0e10
# TYPE servescope_gpu_memory_total_bytes gauge
servescope_gpu_memory_total_bytes{{gpu="0",uuid="{UUID}"}} 8.0e10
"""
GPUS = {"gpus": [{"gpu": "0", "uuid": UUID, "verdict": "ok"}]}


# --- a fake exporter: static /metrics and /api/v1/gpus, optionally slow --------------------------------
@dataclass
class FakeExporter:
    base: str
    delay: float = 0.0
    hits: list[str] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def make_client(
    tmp_path: Path,
    runbooks: Path,
    exporter: FakeExporter,
    *,
    auth: WebhookAuth | None = None,
    db: str = "incidents.db",
    **kwargs: Any,
) -> tuple[TestClient, IncidentStore, IncidentRouter]:
    store = IncidentStore(tmp_path / db)
    ctx = RunContext(exporter_url=exporter.base, timeout_seconds=5)
    router = incident_router(store, runbooks, lambda: ctx, auth=auth or WebhookAuth(token=TOKEN), **kwargs)
    app = FastAPI()
    app.include_router(router)
    return TestClient(app, raise_server_exceptions=False), store, router


def wait_steps(store: IncidentStore, incident_id: int, count: int, timeout: float = 15) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found: dict[str, Any] | None = store.get(incident_id)
        if found is not None and len(found["steps"]) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"incident {incident_id}: fewer than {count} step results after {timeout}s")


def metric(client: TestClient, line_start: str) -> float:
    text = client.get("/incidents/metrics").text
    for line in text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.split()[-1])
    return 0.0
