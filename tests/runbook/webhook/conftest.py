"""The webhook tests' peers: a fake exporter on loopback, runbooks with read and change steps, a client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from servescope.runbooks.incidents import IncidentStore
from servescope.runbooks.webhook import IncidentRouter
from tests.runbook.fakes import step, write_runbook
from tests.runbook.webhook.peers import GPUS, METRICS, FakeExporter, make_client
from tests.support.http_fakes import QuietHandler, loopback_http


@pytest.fixture
def exporter() -> Iterator[FakeExporter]:
    holder: dict[str, FakeExporter] = {}

    class Handler(QuietHandler):
        def answer(self, method: str) -> None:
            fake = holder["fake"]
            fake.hits.append(self.path)
            if fake.delay:
                fake.release.wait(fake.delay)
            path = self.path.split("?")[0]
            if path == "/metrics":
                self.reply(200, METRICS.encode(), "text/plain; version=0.0.4")
            elif path == "/api/v1/gpus":
                self.reply(200, json.dumps(GPUS).encode(), "application/json")
            else:
                self.send_error(404)

    with loopback_http(Handler) as base:
        holder["fake"] = FakeExporter(base)
        try:
            yield holder["fake"]
        finally:
            holder["fake"].release.set()


@pytest.fixture
def runbooks(tmp_path: Path) -> Path:
    folder = tmp_path / "runbooks"
    steps = step("snapshot", "read", "gpu_snapshot", 'gpu: "{{ labels.gpu }}"', title="The GPU now")
    steps += step("fleet", "read", "capacity_advice", title="Spare capacity")
    mitigation = step(
        "scale",
        "change",
        "scale_deployment",
        'namespace: serving\ndeployment: "{{ labels.deployment }}"\nadd: 2',
    )
    write_runbook(folder, "TestAlert", steps=steps, mitigation=mitigation)
    return folder


@pytest.fixture
def client(
    tmp_path: Path, runbooks: Path, exporter: FakeExporter
) -> Iterator[tuple[TestClient, IncidentStore, IncidentRouter]]:
    made = make_client(tmp_path, runbooks, exporter)
    yield made
    made[2].service.close()
    made[1].close()
