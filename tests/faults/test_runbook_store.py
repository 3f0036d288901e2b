"""H4, L3, L4: the incident store survives its disk: full, corrupt, missing, deleted; huge ids are 404.

The full-disk test mounts a small tmpfs (root only; skipped with the reason elsewhere) and always
unmounts it. Rerun: .venv/bin/python -m pytest tests/faults/test_runbook_store.py -q -n 0
"""

from __future__ import annotations

import errno
import logging
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from servescope.runbooks.actions import RunContext
from servescope.runbooks.audit import AuditLog
from servescope.runbooks.auth import WebhookAuth
from servescope.runbooks.incidents import IncidentStore
from servescope.runbooks.server import create_runbook_app
from servescope.runbooks.webhook import IncidentRouter, incident_router
from tests.faults.runbook_peers import WEBHOOK_TOKEN, fault_runbooks, runbook_server
from tests.runbook.webhook.notices import alert, payload

AUTH = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs, unmounted whatever happens."""
    mount = tmp_path / "disk"
    mount.mkdir()
    argv = ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)]
    done = subprocess.run(argv, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _service(tmp_path: Path, db: Path) -> tuple[TestClient, IncidentStore, IncidentRouter]:
    store = IncidentStore(db)
    ctx = RunContext(exporter_url="http://127.0.0.1:9", timeout_seconds=2)
    folder = fault_runbooks(tmp_path / "runbooks")
    router = incident_router(store, folder, lambda: ctx, auth=WebhookAuth(token=WEBHOOK_TOKEN))
    audit = AuditLog(tmp_path / "audit.jsonl")
    app = create_runbook_app(folder, ctx, tokens=None, audit=audit, readiness=store.health)
    app.include_router(router)
    return TestClient(app, raise_server_exceptions=False), store, router


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def _alerts(client: TestClient, first: int, count: int) -> list[int]:
    statuses = []
    for number in range(first, first + count):
        fired = alert(fingerprint=f"{number:016x}", alertname="FaultAlert")
        statuses.append(client.post("/alertmanager/webhook", json=payload(fired), headers=AUTH).status_code)
    return statuses


def _settled(router: IncidentRouter, slots: int) -> int:
    deadline = time.monotonic() + 20
    while router.service.free_slots != slots and time.monotonic() < deadline:
        time.sleep(0.05)
    return router.service.free_slots


def test_a_full_disk_answers_503_leaks_no_slot_and_recovers(tmp_path: Path, small_disk: Path) -> None:
    client, store, router = _service(tmp_path, small_disk / "incidents.sqlite")
    slots = router.service.free_slots
    assert _alerts(client, 0, 20) == [200] * 20
    filler = _fill(small_disk)
    full = _alerts(client, 20, 200)
    ready_while_full = client.get("/readyz")
    assert set(full) <= {200, 503} and full.count(503) >= 150, full
    assert ready_while_full.status_code == 503
    assert "cannot write" in ready_while_full.json()["reason"], ready_while_full.json()
    assert _settled(router, slots) == slots  # no slot leaked by the failed writes
    filler.unlink()
    assert client.get("/readyz").status_code == 200
    # Alertmanager sends the refused ones again: every alert is then stored, none lost.
    assert _alerts(client, 20, 200) == [200] * 200
    assert len(store.list(1000)) == 220
    assert _settled(router, slots) == slots
    router.service.close()
    store.close()


def test_a_corrupt_db_at_start_is_moved_aside_and_the_pages_stay_up(tmp_path: Path) -> None:
    folder = tmp_path / "server"
    folder.mkdir()
    (folder / "incidents.sqlite").write_bytes(b"this is not an SQLite database\n" * 200)
    with runbook_server(folder) as server:
        pages = httpx.get(f"{server.base}/runbooks").status_code
        ready = httpx.get(f"{server.base}/readyz").status_code
        incidents = httpx.get(f"{server.base}/incidents").json()
        server.process.terminate()
        stderr = server.process.communicate(timeout=10)[1]
    assert pages == 200 and ready == 200 and incidents == []
    assert "INCIDENTS DB" in stderr and "CANNOT BE USED" in stderr and "moved aside" in stderr, stderr
    (aside,) = folder.glob("incidents.sqlite.corrupt-*")
    assert aside.read_bytes().startswith(b"this is not an SQLite database")


def test_a_missing_db_is_created_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        store = IncidentStore(tmp_path / "new.sqlite")
    assert "does not exist: a new one is created" in caplog.text
    assert store.health() is None
    store.close()


def test_a_db_deleted_while_running_is_noticed_by_readiness(tmp_path: Path) -> None:
    client, store, router = _service(tmp_path, tmp_path / "incidents.sqlite")
    assert client.get("/readyz").status_code == 200
    (tmp_path / "incidents.sqlite").unlink()
    answer = client.get("/readyz")
    assert answer.status_code == 503 and "deleted or replaced" in answer.json()["reason"]
    router.service.close()
    store.close()


@pytest.mark.parametrize("ident", ["99999999999999999999999", "9223372036854775808", "-1", "1e9", "0"])
def test_huge_or_odd_incident_ids_are_404(tmp_path: Path, ident: str) -> None:
    client, store, router = _service(tmp_path, tmp_path / "incidents.sqlite")
    as_json = client.get(f"/incidents/{ident}")
    as_html = client.get(f"/incidents/{ident}", headers={"Accept": "text/html"})
    assert as_json.status_code == 404 and as_json.json()["error"].startswith("no incident")
    assert as_html.status_code == 404 and "Not found" in as_html.text
    router.service.close()
    store.close()
