"""The shipped canary runbooks' `rollback` step, run as on-call runs it: through the runbook service with
the change token, or `servescope runbook run --step rollback --execute`, against the fake Kubernetes API
server through the rendered RBAC. The token, the audit trail and its record format are the other change
steps' own: a request without a valid token asks the API server nothing and is not a record; an
accepted one is `accepted` before it runs and its outcome after, chained.

Rerun: .venv/bin/python -m pytest tests/runbook/test_rollback_service.py -q -n 0
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servescope.runbooks.audit import AuditLog, fingerprint, verify
from servescope.runbooks.auth import ChangeTokens
from servescope.runbooks.document import SHIPPED_RUNBOOKS
from servescope.runbooks.server import create_runbook_app
from tests.runbook.cli_peers import invoke, label_args
from tests.runbook.kube_fakes import Cluster, cluster
from tests.runbook.rollback_objects import (
    LABELS,
    MODEL,
    NAMESPACE,
    STABLE_TEMPLATE,
    WORKLOAD,
    argo_canary,
    deployment_canary,
    sent,
)

pytestmark = pytest.mark.e2e  # servers on loopback
TOKEN = "on-call-change-token-0042"
WORSE = "ServescopeCanaryWorseThanStable"
PARAMETERS = {
    "model_name": MODEL,
    "revision": LABELS["revision"],
    "stable_revision": LABELS["stable_revision"],
    "namespace": None,
    "workload": None,
    "undo": False,
}


def _service(tmp_path: Path, kube: Cluster, token: str | None) -> tuple[TestClient, AuditLog]:
    audit = AuditLog(tmp_path / "audit.jsonl", echo=io.StringIO())
    ctx = kube.ctx(timeout_seconds=5, serving_namespaces=(NAMESPACE,))
    tokens = ChangeTokens((("alice", token),)) if token else None
    return TestClient(create_runbook_app(SHIPPED_RUNBOOKS, ctx, tokens=tokens, audit=audit)), audit


def _run(client: TestClient, execute: bool, headers: dict[str, str] | None = None) -> Any:
    body = {"labels": LABELS, "execute": execute}
    return client.post(f"/runbooks/{WORSE}/steps/rollback/run", json=body, headers=headers or {})


def test_without_a_valid_token_nothing_is_asked_and_nothing_recorded(tmp_path: Path) -> None:
    with cluster(tmp_path, *deployment_canary()) as kube:
        client, audit = _service(tmp_path, kube, TOKEN)
        missing = _run(client, execute=True)
        wrong = _run(client, execute=True, headers={"Authorization": f"Bearer {TOKEN}x"})
        unconfigured, _ = _service(tmp_path / "none", kube, None)
        refused = _run(unconfigured, execute=True, headers={"Authorization": f"Bearer {TOKEN}"})
        assert (missing.status_code, wrong.status_code, refused.status_code) == (401, 401, 403)
        assert kube.api.requests == [] and audit.records() == []


def test_dry_run_then_execute_through_the_service_rolls_back_and_is_audited(tmp_path: Path) -> None:
    with cluster(tmp_path, *deployment_canary()) as kube:
        client, audit = _service(tmp_path, kube, TOKEN)
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        dry = _run(client, execute=False, headers=bearer)
        assert dry.status_code == 200 and dry.json()["dry_run"] is True, dry.text
        assert kube.api.changes() == []
        done = _run(client, execute=True, headers=bearer)
        assert done.status_code == 200 and done.json()["ok"] is True, done.text
        assert sent(kube) == dry.json()["data"]["api_calls"]
        assert kube.api.store.get(("apps", "deployments"), NAMESPACE, WORKLOAD)["spec"]["template"] == (
            STABLE_TEMPLATE
        )
    records = audit.records()
    print("audit outcomes:", [r["outcome"] for r in records])
    assert [r["outcome"] for r in records] == ["accepted", "dry_run", "accepted", "executed"]
    assert all(r["alert"] == WORSE and r["step"] == "rollback" for r in records)
    assert all(r["parameters"] == PARAMETERS for r in records)
    assert records[2]["labels"] == LABELS and records[2]["execute"] is True
    assert records[3]["caller"] == {"identity": "alice", "host": "testclient", "token": fingerprint(TOKEN)}
    lines = audit.path.read_text().splitlines()
    assert verify(lines)[0] == [] and TOKEN not in audit.path.read_text()


def test_the_cli_executes_only_with_its_audit_record(tmp_path: Path) -> None:
    with cluster(tmp_path, *argo_canary()) as kube:
        args = ["run", "ServescopeCanarySloBurn", *label_args(LABELS), "--step", "rollback", "--execute",
                "--kube-api-url", kube.url, "--kube-token-file", str(kube.token_file),
                "--serving-namespace", NAMESPACE]  # fmt: skip
        (tmp_path / "not-a-folder").write_text("a file")
        refused = invoke(*args, "--audit-log", str(tmp_path / "not-a-folder" / "audit.jsonl"))
        assert refused.exit_code == 1 and "not executed: audit log" in refused.stderr, refused.output
        assert kube.api.requests == []
        done = invoke(*args, "--audit-log", str(tmp_path / "audit.jsonl"))
        assert done.exit_code == 0, done.output
        assert kube.changes() == [
            ("PATCH", f"/apis/argoproj.io/v1alpha1/namespaces/{NAMESPACE}/rollouts/{WORKLOAD}/status")
        ]
        assert kube.api.store.get(("argoproj.io", "rollouts"), NAMESPACE, WORKLOAD)["status"]["abort"] is True
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in records] == ["accepted", "executed"]
    assert all(r["step"] == "rollback" and r["labels"] == LABELS for r in records)
    assert (
        records[0]["caller"]["identity"].startswith("cli:")
        and "rollouts/vllm-deepseek/status" in records[1]["message"]
    )
