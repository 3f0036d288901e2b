"""H3, L1, L2, L5: every authenticated change-step request is audited before anything runs, and fails
closed; requests without a valid token are counted, never recorded.

Rerun: .venv/bin/python -m pytest tests/faults/test_runbook_audit.py -q -n 0
"""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import httpx
import pytest

from servescope.runbooks.audit import MAX_RECORD_BYTES, AuditLog, verify
from tests.faults.runbook_peers import ALERT, TOKEN, run_step, runbook_server
from tests.runbook.kube_fakes import cluster, node
from tests.support.browser import headless_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Dialog

pytestmark = pytest.mark.e2e


def test_an_unwritable_audit_log_runs_nothing_and_answers_503(tmp_path: Path) -> None:
    (tmp_path / "server" / "audit.jsonl").mkdir(parents=True)  # a directory where the file should be
    with cluster(tmp_path, node("node-1")) as kube, runbook_server(tmp_path / "server", kube=kube) as server:
        done = run_step(server.base, "cordon", {"node": "node-1"}, execute=True, token=TOKEN)
        dry = run_step(server.base, "cordon", {"node": "node-1"}, token=TOKEN)
        wrong = run_step(server.base, "cordon", {"node": "node-1"}, execute=True, token="guess")
        none = run_step(server.base, "cordon", {"node": "node-1"}, execute=True)
        assert kube.api.changes() == []  # nothing acted
    assert done.status_code == 503 and dry.status_code == 503
    detail = done.json()["detail"]
    assert detail.startswith("not run: audit log ") and "Is a directory" in detail, detail
    assert wrong.status_code == 401 and none.status_code == 401


def _post(
    base: str, path: str, body: bytes, headers: list[tuple[str, str]] | dict[str, str]
) -> httpx.Response:
    return httpx.post(
        f"{base}{path}", content=body, headers=[("Content-Type", "application/json"), *dict(headers).items()]
        if isinstance(headers, dict) else [("Content-Type", "application/json"), *headers],
    )  # fmt: skip


def test_authenticated_requests_are_audited_and_the_rest_only_counted(tmp_path: Path) -> None:
    good = {"Authorization": f"Bearer {TOKEN}"}
    run = f"/runbooks/{ALERT}/steps/cordon/run"
    with cluster(tmp_path, node("node-1")) as kube, runbook_server(tmp_path / "server", kube=kube) as server:
        answers = [
            _post(server.base, run, b"{not json", {"Authorization": "Bearer guess"}).status_code,
            _post(server.base, run, b"{not json", {}).status_code,
            _post(server.base, f"/runbooks/{ALERT}/steps/nope/run", b"{}", {}).status_code,
            _post(server.base, run, b"{not json", good).status_code,
            _post(server.base, run, b'{"labels": {"node": "n1"}, "extra": 1}', good).status_code,
            _post(server.base, f"/runbooks/{ALERT}/steps/nope/run", b"{}", good).status_code,
            run_step(server.base, "cordon", {"node": "node-1"}, execute=True, token=TOKEN).status_code,
        ]
        records = server.audit()
        metrics = httpx.get(f"{server.base}/incidents/metrics").text
        assert kube.changes() == [("PATCH", "/api/v1/nodes/node-1")]
    assert answers == [401, 401, 404, 422, 422, 404, 200]
    assert [r["outcome"] for r in records] == [
        "malformed",
        "malformed",
        "unknown_step",
        "accepted",
        "executed",
    ]
    # one bare token in the token file: its name is `token`
    assert {r["caller"]["identity"] for r in records} == {"token"}  # type: ignore[index]
    refused = {
        m.group(1): float(m.group(2))
        for m in re.finditer(r'refused_requests_total\{reason="(\w+)"\} (\S+)', metrics)
    }
    assert refused == {"refused_bad_token": 1, "refused_no_token": 1, "unknown_step": 1}, refused


def test_the_audit_host_is_the_rightmost_address_trusted_proxies_did_not_add(tmp_path: Path) -> None:
    # HAProxy's `option forwardfor` appends a header line of its own: the client's forged one comes first.
    forwarded = [
        ("X-Forwarded-For", "203.0.113.66"),
        ("X-Forwarded-For", "198.51.100.7"),
        ("Authorization", f"Bearer {TOKEN}"),
    ]
    body = b'{"labels": {"node": "n1"}}'
    run = f"/runbooks/{ALERT}/steps/cordon/run"
    with runbook_server(tmp_path / "plain") as server:
        _post(server.base, run, body, forwarded)
        plain = server.audit()
    with runbook_server(tmp_path / "proxied", "--trusted-proxy", "127.0.0.0/8") as server:
        _post(server.base, run, body, forwarded)
        _post(server.base, run, body, [("X-Forwarded-For", "127.0.0.9, not-an-ip"), forwarded[2]])
        proxied = server.audit()
    assert {r["caller"]["host"] for r in plain} == {"127.0.0.1"}  # type: ignore[index]
    hosts = [r["caller"]["host"] for r in proxied]  # type: ignore[index]
    assert (
        hosts[0] == "198.51.100.7"
        and hosts[-1] == "127.0.0.1 (X-Forwarded-For entry 'not-an-ip' is not an address)"
    )


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
    with (
        cluster(tmp_path, node("prod-db-1")) as kube,
        runbook_server(tmp_path / "server", kube=kube) as server,
        headless_chromium() as (_, browser),
    ):
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
        for _ in range(100):  # the dialog, within 10 s however busy the machine
            if asked:
                break
            page.wait_for_timeout(100)
        page.wait_for_timeout(300)  # and nothing sent after it was dismissed
        outcomes = [r["outcome"] for r in server.audit()]
        assert kube.api.requests == []  # dismissed: nothing was sent
    assert len(asked) == 1
    assert "cordon_node(node='prod-db-1')" in asked[0] and 'gpu="0"' in asked[0], asked[0]
    assert outcomes == []


def test_a_record_is_bounded(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl", echo=io.StringIO())
    value = "v" * 10_000
    hostile = dict.fromkeys((f"label{i}" for i in range(50_000)), value)
    for _ in range(20):
        written = audit.record(
            host="127.0.0.1", identity="alice", token=TOKEN, alert=ALERT, step="cordon", parameters=None,
            labels=hostile, execute=True, outcome="failed", message="x" * 100_000,
        )  # fmt: skip
        assert len(json.dumps(written)) <= MAX_RECORD_BYTES
    assert verify((tmp_path / "audit.jsonl").read_text().splitlines())[:2] == ([], 20)
