"""The Alertmanager webhook makes incidents: read steps run, dedup holds across restarts, pages show them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from servescope.runbooks.incidents import IncidentStore
from servescope.runbooks.webhook import IncidentRouter
from tests.runbook.webhook.notices import alert, payload, post
from tests.runbook.webhook.peers import UUID, FakeExporter, make_client, metric, wait_steps


# --- the happy path -----------------------------------------------------------------------------------
def assert_shown(http: TestClient, incident_id: int, step_ids: set[str]) -> None:
    """The incident is served as JSON and as a page, and listed."""
    shown = http.get(f"/incidents/{incident_id}")
    assert shown.status_code == 200 and shown.json()["steps"][0]["step_id"] in step_ids
    page = http.get(f"/incidents/{incident_id}", headers={"Accept": "text/html"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "The GPU now" in page.text and UUID in page.text
    listing = http.get("/incidents", headers={"Accept": "text/html"})
    assert f"/incidents/{incident_id}" in listing.text
    assert http.get("/incidents").json()[0]["id"] == incident_id


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
    assert_shown(http, incident["id"], set(steps))

    again = post(http, payload())
    assert again.json() == {"received": 1, "new": 0, "duplicates": 1, "queued": 0}
    assert len(store.list()) == 1
    assert metric(http, "servescope_webhook_dedup_hits_total") == 1

    assert_resolved(http, store, incident["id"])
    assert metric(http, 'servescope_webhook_requests_total{outcome="ok"}') == 3
    assert metric(http, 'servescope_runbook_step_runs_total{outcome="ok"}') == 2
    assert metric(http, "servescope_webhook_queue_depth") == 0
    assert http.get("/incidents/999").status_code == 404


def assert_resolved(http: TestClient, store: IncidentStore, incident_id: int) -> None:
    """Alertmanager's resolved notice closes the incident, which is then listed as resolved."""
    resolved = post(http, payload(alert("resolved"), status="resolved"))
    assert resolved.json() == {"received": 1, "new": 1, "duplicates": 0, "queued": 0}
    [done] = store.list()
    assert done["status"] == "resolved" and done["ends_at"] == "2025-03-01T10:30:00Z"
    assert store.list(status="firing") == []
    assert http.get("/incidents", params={"status": "resolved"}).json()[0]["id"] == incident_id
    assert store.latest("TestAlert") == [
        {
            "id": incident_id,
            "status": "resolved",
            "starts_at": "2025-03-01T10:00:00.123Z",
            "labels": done["labels"],
            "url": f"/incidents/{incident_id}",
        }
    ]


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
