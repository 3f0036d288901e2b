"""H3, L1, L2, L5: every change-step request is audited before anything runs, and fails closed.

Rerun: .venv/bin/python -m pytest tests/faults/test_runbook_audit.py -q -n 0
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import httpx
import pytest

from servescope.runbooks.audit import MAX_RECORD_BYTES, AuditLog
from tests.faults.runbook_peers import ALERT, TOKEN, run_step, runbook_server
from tests.runbook.fakes import fake_kubectl
from tests.support.browser import headless_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Dialog

pytestmark = pytest.mark.e2e


def test_an_unwritable_audit_log_runs_nothing_and_answers_503(tmp_path: Path) -> None:
    kubectl, marker = fake_kubectl(tmp_path)
    (tmp_path / "server" / "audit.jsonl").mkdir(parents=True)  # a directory where the file should be
    with runbook_server(tmp_path / "server", kubectl=kubectl) as server:
        done = run_step(server.base, "cordon", {"node": "node-1"}, execute=True, token=TOKEN)
        dry = run_step(server.base, "cordon", {"node": "node-1"}, token=TOKEN)
        wrong = run_step(server.base, "cordon", {"node": "node-1"}, execute=True, token="guess")
        none = run_step(server.base, "cordon", {"node": "node-1"}, execute=True)
    assert done.status_code == 503 and dry.status_code == 503
    detail = done.json()["detail"]
    assert detail.startswith("not run: audit log ") and "Is a directory" in detail, detail
    assert not marker.exists()  # kubectl never ran
    assert wrong.status_code == 401 and none.status_code == 401


def _post(base: str, path: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{base}{path}", content=body, headers={"Content-Type": "application/json", **headers})


def test_every_change_step_request_is_audited_and_the_token_checked_first(tmp_path: Path) -> None:
    kubectl, marker = fake_kubectl(tmp_path)
    good = {"Authorization": f"Bearer {TOKEN}"}
    run = f"/runbooks/{ALERT}/steps/cordon/run"
    with runbook_server(tmp_path / "server", kubectl=kubectl) as server:
        answers = [
            _post(server.base, run, b"{not json", {"Authorization": "Bearer guess"}).status_code,
            _post(server.base, run, b"{not json", good).status_code,
            _post(server.base, run, b'{"labels": {"node": "n1"}, "extra": 1}', good).status_code,
            _post(server.base, f"/runbooks/{ALERT}/steps/nope/run", b"{}", good).status_code,
            run_step(server.base, "cordon", {"node": "node-1"}, execute=True, token=TOKEN).status_code,
        ]
        outcomes = [r["outcome"] for r in server.audit()]
    assert answers == [401, 422, 422, 404, 200]
    assert outcomes == ["refused_bad_token", "malformed", "malformed", "unknown_step", "accepted", "executed"]
    assert marker.read_text().count("cordon") == 1


def test_the_audit_host_is_the_socket_peer_unless_a_trusted_proxy_names_it(tmp_path: Path) -> None:
    forwarded = {"X-Forwarded-For": "203.0.113.66", "Authorization": "Bearer guess"}
    body = b'{"labels": {"node": "n1"}}'
    run = f"/runbooks/{ALERT}/steps/cordon/run"
    with runbook_server(tmp_path / "plain") as server:
        _post(server.base, run, body, forwarded)
        plain = server.audit()
    with runbook_server(tmp_path / "proxied", "--trusted-proxy", "127.0.0.1") as server:
        _post(server.base, run, body, forwarded)
        proxied = server.audit()
    assert [r["caller"]["host"] for r in plain] == ["127.0.0.1"]  # type: ignore[index]
    assert [r["caller"]["host"] for r in proxied] == ["203.0.113.66"]  # type: ignore[index]


def test_the_execute_confirmation_shows_every_bound_parameter(tmp_path: Path) -> None:
    crafted = {"node": "prod-db-1", "gpu": "0", "namespace": "kube-system"}
    with runbook_server(tmp_path / "server") as server:
        page = httpx.get(f"{server.base}/runbooks/{ALERT}?{urlencode(crafted)}").text
    button = re.search(r'<button class="run" id="run-cordon"[^>]*data-call="([^"]*)"', page)
    assert button is not None
    assert html.unescape(button.group(1)) == "cordon_node(node='prod-db-1')"
    # The confirmation text is built from that call and from every label the request will carry.
    assert "button.dataset.call" in page and "with the alert labels" in page


def test_chromium_shows_the_bound_parameters_before_executing(tmp_path: Path) -> None:
    crafted = {"node": "prod-db-1", "gpu": "0"}
    kubectl, marker = fake_kubectl(tmp_path)
    with runbook_server(tmp_path / "server", kubectl=kubectl) as server, headless_chromium() as (_, browser):
        page = browser.new_page()
        asked: list[str] = []

        def dismiss(dialog: Dialog) -> None:
            asked.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", dismiss)
        page.goto(f"{server.base}/runbooks/{ALERT}?{urlencode(crafted)}")
        page.fill("#token", TOKEN)
        page.check("#exec-cordon")
        page.click("#run-cordon")
        page.wait_for_timeout(300)
        outcomes = [r["outcome"] for r in server.audit()]
    assert len(asked) == 1
    assert "cordon_node(node='prod-db-1')" in asked[0] and 'gpu="0"' in asked[0], asked[0]
    assert outcomes == [] and not marker.exists()  # dismissed: nothing was sent


def test_the_audit_log_is_bounded_on_disk(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl", max_file_bytes=65_536)
    value = "v" * 10_000
    hostile = dict.fromkeys((f"label{i}" for i in range(50_000)), value)
    for _ in range(200):
        written = audit.record(
            host="127.0.0.1", token=None, alert=ALERT, step="cordon", parameters=None, labels=hostile,
            execute=True, outcome="refused_no_token", message="x" * 100_000,
        )  # fmt: skip
        assert len(json.dumps(written)) <= MAX_RECORD_BYTES
    files = sorted(tmp_path.glob("audit.jsonl*"))
    assert [f.name for f in files] == ["audit.jsonl", "audit.jsonl.1"]
    assert all(f.stat().st_size <= 65_536 + MAX_RECORD_BYTES for f in files)
    assert json.loads(files[0].read_text().splitlines()[-1])["outcome"] == "refused_no_token"
