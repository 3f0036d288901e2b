"""Any body, any labels: the webhook answers one of its documented statuses."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servescope.runbooks.actions import RunContext
from servescope.runbooks.incidents import IncidentStore
from servescope.runbooks.webhook import WebhookAuth, incident_router
from tests.runbook.fakes import step, write_runbook
from tests.runbook.webhook.notices import AUTH, TOKEN, alert, payload, post

# --- fuzz ---------------------------------------------------------------------------------------------
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
LABELS = st.dictionaries(st.text(max_size=30), st.text(max_size=200), max_size=6)
ALLOWED = {200, 401, 413, 415, 422, 503}
# The client is built once per test, not per example; slow generation on a busy machine is no failure.
SUPPRESSED = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


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


@settings(max_examples=150, deadline=None, suppress_health_check=SUPPRESSED)
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
@settings(max_examples=150, deadline=None, suppress_health_check=SUPPRESSED)
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
