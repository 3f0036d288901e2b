"""The small ones (I): token files readable by others refused, HEAD where GET, no /docs unless asked,
CSP and nosniff on every HTML page, a webhook post without credentials refused and counted.

Rerun: .venv/bin/python -m pytest tests/faults/test_runbook_small.py -q -n 0
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from tests.faults.runbook_peers import ALERT, WEBHOOK_TOKEN, runbook_server, secret
from tests.runbook.webhook.notices import alert, payload
from tests.support import SERVESCOPE

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("mode", [0o644, 0o604, 0o602])
def test_a_token_file_other_users_can_reach_is_refused_at_start(tmp_path: Path, mode: int) -> None:
    token = secret(tmp_path / "token", "a-token", mode)
    done = subprocess.run(
        [SERVESCOPE, "runbook-server", "--listen", "127.0.0.1:0", "--token-file", str(token)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert f"--token-file {token}: other users may read or write it (mode {mode:04o})" in done.stderr


def test_a_group_readable_token_file_is_taken(tmp_path: Path) -> None:
    # Kubernetes mounts a Secret 0440 for the pod's fsGroup: group-readable is how it arrives.
    with runbook_server(tmp_path, token_mode=0o440) as server:
        assert httpx.get(f"{server.base}/healthz").status_code == 200
        assert (tmp_path / "token").stat().st_mode & 0o777 == 0o440


PAGES = ["/healthz", "/readyz", "/runbooks", f"/runbooks/{ALERT}?gpu=0", "/incidents", "/incidents/metrics"]


def test_head_is_answered_wherever_get_is(tmp_path: Path) -> None:
    with runbook_server(tmp_path) as server, httpx.Client(base_url=server.base) as client:
        answers = {path: (client.head(path), client.get(path)) for path in PAGES}
    for path, (head, get) in answers.items():
        assert head.status_code == get.status_code == 200, path
        assert head.content == b"" and head.headers["content-type"] == get.headers["content-type"], path


@pytest.mark.parametrize(("flags", "status"), [((), 404), (("--api-docs",), 200)])
def test_docs_and_openapi_only_when_asked(tmp_path: Path, flags: tuple[str, ...], status: int) -> None:
    with runbook_server(tmp_path, *flags) as server:
        found = [httpx.get(f"{server.base}{path}").status_code for path in ("/docs", "/openapi.json")]
    assert found == [status, status]


def test_every_html_page_has_csp_and_nosniff(tmp_path: Path) -> None:
    html = {"Accept": "text/html"}
    hook = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
    with runbook_server(tmp_path) as server, httpx.Client(base_url=server.base, headers=html) as client:
        assert client.post("/alertmanager/webhook", json=payload(alert()), headers=hook).status_code == 200
        incident = client.get("/incidents", headers={"Accept": "application/json"}).json()[0]["url"]
        paths = ["/runbooks", f"/runbooks/{ALERT}", "/runbooks/NoSuchAlert", "/incidents", incident]
        paths.append("/incidents/7")
        answers = {path: client.get(path) for path in paths}
    for path, answer in answers.items():
        assert answer.headers["content-type"].startswith("text/html"), path
        assert "default-src 'self'" in answer.headers["content-security-policy"], path
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"], path
        assert answer.headers["x-content-type-options"] == "nosniff", path


def test_a_webhook_post_without_credentials_is_refused_and_counted_by_the_served_service(
    tmp_path: Path,
) -> None:
    with runbook_server(tmp_path) as server:
        hook = f"{server.base}/alertmanager/webhook"
        body = payload(alert(alertname=ALERT))
        refused = [
            httpx.post(hook, json=body, headers=headers) for headers in ({}, {"Authorization": "Bearer x"})
        ]
        taken = httpx.post(hook, json=body, headers={"Authorization": f"Bearer {WEBHOOK_TOKEN}"})
        metrics = httpx.get(f"{server.base}/incidents/metrics").text
    assert [r.status_code for r in refused] == [401, 401]
    assert all(
        r.headers["www-authenticate"].startswith("Bearer") and r.json() == {"error": "unauthorized"}
        for r in refused
    )
    assert taken.status_code == 200
    assert 'servescope_webhook_requests_total{outcome="unauthorized"} 2.0' in metrics
    assert 'servescope_webhook_requests_total{outcome="ok"} 1.0' in metrics
