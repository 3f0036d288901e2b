"""The Alertmanager webhook receiver: incidents in SQLite, read steps on a bounded pool, auth, limits,
dedup across restarts, metrics; hostile labels stay data."""

from __future__ import annotations

import base64
import copy
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servescope.runbooks.actions import RunContext
from servescope.runbooks.incidents import IncidentStore
from servescope.runbooks.settings import TokenSettings
from servescope.runbooks.webhook import IncidentRouter, WebhookAuth, incident_router
from tests.runbook.fakes import corpus, step, write_runbook

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
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


@pytest.fixture
def exporter() -> Iterator[FakeExporter]:
    holder: dict[str, FakeExporter] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fake = holder["fake"]
            fake.hits.append(self.path)
            if fake.delay:
                fake.release.wait(fake.delay)
            path = self.path.split("?")[0]
            if path == "/metrics":
                data, kind = METRICS.encode(), "text/plain; version=0.0.4"
            elif path == "/api/v1/gpus":
                data, kind = json.dumps(GPUS).encode(), "application/json"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder["fake"] = FakeExporter(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield holder["fake"]
    holder["fake"].release.set()
    server.shutdown()
    server.server_close()


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


@pytest.fixture
def client(
    tmp_path: Path, runbooks: Path, exporter: FakeExporter
) -> Iterator[tuple[TestClient, IncidentStore, IncidentRouter]]:
    made = make_client(tmp_path, runbooks, exporter)
    yield made
    made[2].service.close()
    made[1].close()


def alert(
    status: str = "firing",
    fingerprint: str = "a1b2c3d4e5f60718",
    starts_at: str = "2025-03-01T10:00:00.123Z",
    **labels: str,
) -> dict[str, Any]:
    return {
        "status": status,
        "labels": {"alertname": "TestAlert", "severity": "warning", "gpu": "0", **labels},
        "annotations": {"summary": "GPU 0 saturated", "runbook_url": "https://example/TestAlert"},
        "startsAt": starts_at,
        "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2025-03-01T10:30:00Z",
        "generatorURL": "http://prometheus:9090/graph?g0.expr=up",
        "fingerprint": fingerprint,
    }


def payload(*alerts: dict[str, Any], status: str = "firing") -> dict[str, Any]:
    return {
        "version": "4",
        "groupKey": '{}/{alertname=~".+"}:{alertname="TestAlert", instance="node-a:9108"}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "servescope-runbooks",
        "groupLabels": {"alertname": "TestAlert", "instance": "node-a:9108"},
        "commonLabels": {"alertname": "TestAlert", "severity": "warning"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "notification_reason": "new_alert",
        "alerts": list(alerts) or [alert(status)],
    }


def post(client: TestClient, body: Any, headers: dict[str, str] | None = None) -> Any:
    return client.post("/alertmanager/webhook", json=body, headers=AUTH if headers is None else headers)


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


# --- the happy path -----------------------------------------------------------------------------------
@pytest.mark.e2e
def test_firing_then_duplicate_then_resolved(
    client: tuple[TestClient, IncidentStore, IncidentRouter],
) -> None:
    http, store, _ = client
    answer = post(http, payload())
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"received": 1, "new": 1, "duplicates": 0, "queued": 1}
    [incident] = store.list()
    found = wait_steps(store, incident["id"], 2)
    steps = {s["step_id"]: s for s in found["steps"]}
    assert set(steps) == {"snapshot", "fleet"}  # the change step never runs from the webhook
    assert steps["snapshot"]["ok"], steps["snapshot"]["output"]
    assert steps["snapshot"]["data"]["uuid"] == UUID
    assert found["status"] == "firing" and found["alertname"] == "TestAlert"
    assert found["labels"]["gpu"] == "0"

    shown = http.get(f"/incidents/{incident['id']}")
    assert shown.status_code == 200 and shown.json()["steps"][0]["step_id"] in steps
    page = http.get(f"/incidents/{incident['id']}", headers={"Accept": "text/html"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "The GPU now" in page.text and UUID in page.text
    listing = http.get("/incidents", headers={"Accept": "text/html"})
    assert f"/incidents/{incident['id']}" in listing.text
    assert http.get("/incidents").json()[0]["id"] == incident["id"]

    again = post(http, payload())
    assert again.json() == {"received": 1, "new": 0, "duplicates": 1, "queued": 0}
    assert len(store.list()) == 1
    assert metric(http, "servescope_webhook_dedup_hits_total") == 1

    resolved = post(http, payload(alert("resolved"), status="resolved"))
    assert resolved.json() == {"received": 1, "new": 1, "duplicates": 0, "queued": 0}
    [done] = store.list()
    assert done["status"] == "resolved" and done["ends_at"] == "2025-03-01T10:30:00Z"
    assert store.list(status="firing") == []
    assert http.get("/incidents", params={"status": "resolved"}).json()[0]["id"] == incident["id"]
    assert store.latest("TestAlert") == [
        {
            "id": incident["id"],
            "status": "resolved",
            "starts_at": "2025-03-01T10:00:00.123Z",
            "labels": done["labels"],
            "url": f"/incidents/{incident['id']}",
        }
    ]
    assert metric(http, 'servescope_webhook_requests_total{outcome="ok"}') == 3
    assert metric(http, 'servescope_runbook_step_runs_total{outcome="ok"}') == 2
    assert metric(http, "servescope_webhook_queue_depth") == 0
    assert http.get("/incidents/999").status_code == 404


def test_incident_pages_are_served_in_the_runbook_pages_shell(
    client: tuple[TestClient, IncidentStore, IncidentRouter],
) -> None:
    http, store, _ = client
    assert post(http, payload()).status_code == 200
    [incident] = store.list()
    for path, status in (
        (f"/incidents/{incident['id']}", 200),
        ("/incidents", 200),
        ("/incidents/987654", 404),
    ):
        page = http.get(path, headers={"Accept": "text/html"})
        assert page.status_code == status, path
        assert page.headers["content-security-policy"].startswith("default-src 'self'; script-src 'none'; ")
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["referrer-policy"] == "no-referrer"
        assert page.text.startswith('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>')
        assert ".step.change{" in page.text and "<script" not in page.text
    assert "no incident 987654" in http.get("/incidents/987654", headers={"Accept": "text/html"}).text


@pytest.mark.e2e
def test_a_group_is_split_and_alerts_without_runbook_are_noted(
    client: tuple[TestClient, IncidentStore, IncidentRouter],
) -> None:
    http, store, _ = client
    other = alert(fingerprint="ffff000011112222")
    other["labels"]["alertname"] = "NoSuchRunbook"
    answer = post(http, payload(alert(), other))
    assert answer.json() == {"received": 2, "new": 2, "duplicates": 0, "queued": 1}
    by_name = {i["alertname"]: i for i in store.list()}
    assert "no runbook" in by_name["NoSuchRunbook"]["note"]
    # A new firing of the same fingerprint (another startsAt) is another incident.
    post(http, payload(alert(starts_at="2025-03-02T00:00:00Z")))
    assert len(store.latest("TestAlert")) == 2


@pytest.mark.e2e
def test_dedup_survives_restart_and_wal(tmp_path: Path, runbooks: Path, exporter: FakeExporter) -> None:
    http, store, router = make_client(tmp_path, runbooks, exporter)
    assert store.journal_mode() == "wal"
    assert post(http, payload()).json()["new"] == 1
    router.service.close()
    store.close()
    with sqlite3.connect(tmp_path / "incidents.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"

    http, store, router = make_client(tmp_path, runbooks, exporter)
    answer = post(http, payload())
    assert answer.json() == {"received": 1, "new": 0, "duplicates": 1, "queued": 0}
    assert len(store.list()) == 1
    router.service.close()
    store.close()


# --- refusals -----------------------------------------------------------------------------------------
@pytest.mark.e2e
def test_authentication(tmp_path: Path, runbooks: Path, exporter: FakeExporter) -> None:
    http, _, router = make_client(tmp_path, runbooks, exporter)
    assert post(http, payload(), headers={}).status_code == 401
    assert post(http, payload(), headers={"Authorization": "Bearer nope"}).status_code == 401
    assert post(http, payload(), headers={"Authorization": "Basic " + "x"}).status_code == 401
    assert post(http, payload(), headers={"Authorization": TOKEN}).status_code == 401
    assert metric(http, 'servescope_webhook_requests_total{outcome="unauthorized"}') == 4
    router.service.close()

    basic = WebhookAuth(username="am", password="pa:ss")
    http, _, router = make_client(tmp_path, runbooks, exporter, auth=basic, db="basic.db")
    good = "Basic " + base64.b64encode(b"am:pa:ss").decode()
    bad = "Basic " + base64.b64encode(b"am:wrong").decode()
    assert post(http, payload(), headers={"Authorization": good}).status_code == 200
    assert post(http, payload(), headers={"Authorization": bad}).status_code == 401
    assert post(http, payload(), headers=AUTH).status_code == 401  # no token configured
    router.service.close()

    # No credentials configured at all: nobody gets in.
    http, _, router = make_client(tmp_path, runbooks, exporter, auth=WebhookAuth(), db="none.db")
    assert post(http, payload(), headers={"Authorization": "Bearer "}).status_code == 401
    router.service.close()


def test_token_file_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o640)
    assert WebhookAuth.from_token_file(path).allows(f"Bearer {TOKEN}")
    monkeypatch.setenv("SERVESCOPE_WEBHOOK_TOKEN", TOKEN)
    assert WebhookAuth.from_settings(TokenSettings()).allows(f"bearer {TOKEN}")
    other = tmp_path / "other"
    other.write_text("from-the-file\n")
    other.chmod(0o600)
    assert WebhookAuth.from_settings(TokenSettings(webhook_token_file=other)).token == "from-the-file"
    monkeypatch.delenv("SERVESCOPE_WEBHOOK_TOKEN")
    assert not WebhookAuth.from_settings(TokenSettings()).allows("Bearer ")
    path.write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        WebhookAuth.from_token_file(path)


@pytest.mark.e2e
def test_content_type_size_and_payload(client: tuple[TestClient, IncidentStore, IncidentRouter]) -> None:
    http, store, _ = client
    url = "/alertmanager/webhook"
    body = json.dumps(payload()).encode()
    assert http.post(url, content=body, headers={**AUTH, "Content-Type": "text/plain"}).status_code == 415
    assert http.post(url, content=body, headers=AUTH).status_code == 415  # no Content-Type
    json_type = {**AUTH, "Content-Type": "application/json; charset=utf-8"}
    huge = http.post(url, content=b"[" + b"0," * 600_000 + b"0]", headers=json_type)
    assert huge.status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds on what is read
        for _ in range(20):
            yield b" " * 100_000

    assert http.post(url, content=chunks(), headers=json_type).status_code == 413

    broken = http.post(url, content=b'{"version": "4", "alerts": [', headers=json_type)
    assert broken.status_code == 422 and "invalid JSON" in broken.json()["error"]
    missing = post(http, {k: v for k, v in payload().items() if k != "alerts"})
    assert missing.status_code == 422 and "alerts" in missing.json()["error"]
    bad = payload()
    del bad["alerts"][0]["fingerprint"]
    answer = post(http, bad)
    assert answer.status_code == 422 and "alerts.0.fingerprint" in answer.json()["error"]
    v3 = {**payload(), "version": "3"}
    assert "version" in post(http, v3).json()["error"]
    assert post(http, [1, 2]).status_code == 422
    assert store.list() == []


@pytest.mark.e2e
def test_queue_full_is_503_and_counted(tmp_path: Path, runbooks: Path, exporter: FakeExporter) -> None:
    exporter.delay = 20  # until released
    http, store, router = make_client(tmp_path, runbooks, exporter, workers=1, queue_size=1)
    first = post(http, payload(alert(fingerprint="f1")))
    second = post(http, payload(alert(fingerprint="f2")))
    assert first.json()["queued"] == 1 and second.json()["queued"] == 1
    assert metric(http, "servescope_webhook_queue_depth") == 2
    third = post(http, payload(alert(fingerprint="f3")))
    assert third.status_code == 503 and third.headers["Retry-After"]
    assert metric(http, 'servescope_webhook_requests_total{outcome="queue_full"}') == 1
    exporter.release.set()
    for incident in store.list():
        if incident["fingerprint"] != "f3":
            wait_steps(store, incident["id"], 2)
    deadline = time.monotonic() + 10
    while metric(http, "servescope_webhook_queue_depth") and time.monotonic() < deadline:
        time.sleep(0.05)
    # Alertmanager's re-send is not a duplicate: the alert was not handled; now it is queued.
    retried = post(http, payload(alert(fingerprint="f3")))
    assert retried.json() == {"received": 1, "new": 1, "duplicates": 0, "queued": 1}
    assert len(store.list()) == 3  # the incident opened before the 503 is reused
    router.service.close()
    store.close()


@pytest.mark.e2e
def test_hostile_labels_stay_data(
    client: tuple[TestClient, IncidentStore, IncidentRouter], tmp_path: Path
) -> None:
    http, store, _ = client
    sentinel = tmp_path / "SENTINEL"
    values = [v for v in corpus(sentinel) if "\x00" not in v] + ["<script>alert(1)</script>"]
    for n, value in enumerate(values):
        hostile = alert(fingerprint=f"hostile{n}", gpu=value, deployment=value)
        hostile["labels"]["<b>x</b>"] = value
        answer = post(http, payload(hostile))
        assert answer.status_code == 200, answer.text
    for incident in store.list(limit=100):
        found = wait_steps(store, incident["id"], 2)
        assert found["labels"]["gpu"] in values
        snapshot = next(s for s in found["steps"] if s["step_id"] == "snapshot")
        assert not snapshot["ok"]
        assert snapshot["data"] == {"error": "parameters"}, snapshot
        assert "invalid parameter 'gpu'" in snapshot["output"]
        page = http.get(f"/incidents/{incident['id']}", headers={"Accept": "text/html"}).text
        assert "<script>" not in page and "<b>x</b>" not in page
    assert not sentinel.exists()


# --- fuzz ---------------------------------------------------------------------------------------------
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
LABELS = st.dictionaries(st.text(max_size=30), st.text(max_size=200), max_size=6)
ALLOWED = {200, 401, 413, 415, 422, 503}


@pytest.fixture(scope="module")
def fuzz_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    tmp = tmp_path_factory.mktemp("fuzz")
    folder = tmp / "runbooks"
    write_runbook(folder, "TestAlert", steps=step("fleet", "read", "capacity_advice"))
    store = IncidentStore(tmp / "fuzz.db")
    # Nothing listens on port 9: read steps fail fast, as data.
    router = incident_router(
        store,
        folder,
        lambda: RunContext(exporter_url="http://127.0.0.1:9", timeout_seconds=1),
        auth=WebhookAuth(token=TOKEN),
        max_body_bytes=4096,
        workers=2,
        queue_size=4,
    )
    app = FastAPI()
    app.include_router(router)
    yield TestClient(app, raise_server_exceptions=False)
    router.service.close()
    store.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=JSONISH | st.binary(max_size=64).map(lambda b: b.decode("latin-1")),
    auth=st.sampled_from([AUTH, {}, {"Authorization": "Bearer x"}]),
    kind=st.sampled_from(["application/json", "text/plain", "application/alert+json", ""]),
)
def test_fuzz_bodies(fuzz_client: TestClient, body: Any, auth: dict[str, str], kind: str) -> None:
    content = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else json.dumps(body).encode()
    headers = {**auth, "Content-Type": kind} if kind else auth
    answer = fuzz_client.post("/alertmanager/webhook", content=content, headers=headers)
    assert answer.status_code in ALLOWED, answer.text


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    labels=LABELS,
    annotations=LABELS,
    fingerprint=st.text(min_size=0, max_size=40),
    starts=st.text(max_size=30),
)
def test_fuzz_labels(
    fuzz_client: TestClient,
    labels: dict[str, str],
    annotations: dict[str, str],
    fingerprint: str,
    starts: str,
) -> None:
    item = alert(fingerprint=fingerprint, starts_at=starts)
    item["labels"] = {**copy.deepcopy(labels), "alertname": labels.get("alertname", "TestAlert")}
    item["annotations"] = annotations
    answer = post(fuzz_client, payload(item))
    assert answer.status_code in ALLOWED, answer.text
    if answer.status_code == 200:
        listed = fuzz_client.get("/incidents", headers={"Accept": "text/html"})
        assert listed.status_code == 200
