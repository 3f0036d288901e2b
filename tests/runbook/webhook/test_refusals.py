"""What the webhook refuses (bad credentials, wrong content types, large bodies, a full queue), and
hostile labels staying data."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from starlette.types import Receive, Scope, Send

from servescope.runbooks.auth import REALM
from servescope.runbooks.incidents import IncidentStore
from servescope.runbooks.server import wrapped
from servescope.runbooks.settings import TokenSettings
from servescope.runbooks.webhook import IncidentRouter, WebhookAuth
from tests.runbook.fakes import corpus
from tests.runbook.webhook.notices import AUTH, TOKEN, alert, payload, post
from tests.runbook.webhook.peers import FakeExporter, make_client, metric, wait_steps


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


def test_the_served_app_refuses_a_webhook_post_without_credentials_before_the_app_sees_it() -> None:
    seen: list[str] = []
    refused: list[int] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(f"{scope['method']} {scope['path']}")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    http = TestClient(wrapped(app, WebhookAuth(token=TOKEN), lambda: refused.append(1)))
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": TOKEN}):
        answer = post(http, payload(), headers=headers)
        assert answer.status_code == 401 and answer.json() == {"error": "unauthorized"}
        assert answer.headers["www-authenticate"] == REALM
    assert post(http, payload(), headers=AUTH).status_code == 200
    assert http.get("/healthz").status_code == 200 and http.post("/runbooks/x/steps/y/run").status_code == 200
    assert seen == ["POST /alertmanager/webhook", "GET /healthz", "POST /runbooks/x/steps/y/run"]
    assert len(refused) == 3


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
        # kept as data, a value past the cap cut with a visible mark
        kept = found["labels"]["gpu"]
        assert kept in values or (kept.endswith("...[truncated: 10000 characters]") and len(kept) < 1100)
        snapshot = next(s for s in found["steps"] if s["step_id"] == "snapshot")
        assert not snapshot["ok"]
        assert snapshot["data"] == {"error": "parameters"}, snapshot
        assert "invalid parameter 'gpu'" in snapshot["output"]
        page = http.get(f"/incidents/{incident['id']}", headers={"Accept": "text/html"}).text
        assert "<script>" not in page and "<b>x</b>" not in page
    assert not sentinel.exists()
