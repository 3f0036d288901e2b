"""The runbook server: index, pages (escaped), read steps, change steps behind a token, the audit log."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from servescope.runbooks.actions import RunContext
from servescope.runbooks.audit import AuditLog, fingerprint, verify
from servescope.runbooks.auth import ChangeTokens
from servescope.runbooks.document import load_runbooks, runbooks_dir
from servescope.runbooks.markdown import markdown
from servescope.runbooks.refusals import REFUSED
from servescope.runbooks.runbook_routes import Pages
from servescope.runbooks.server import create_runbook_app, runbook_router
from tests.support import Served, servescope_serving

from .fakes import corpus, step, write_runbook
from .kube_fakes import Cluster, cluster, deployment

TOKEN = "s3cret-Token-value-4242"
ALERT = "TestAlert"
SCALE = step(
    "scale-out",
    "change",
    "scale_deployment",
    'namespace: "{{ labels.namespace }}"\ndeployment: vllm\nadd: 4',
    title="Add workers",
)
READ = step("snapshot", "read", "gpu_snapshot", 'gpu: "{{ labels.gpu }}"', title="Look at the GPU")


@pytest.fixture(scope="module")
def exporter() -> Iterator[Served]:
    with servescope_serving("--simulate", "--gpus", "2", "--engines", "1", "--seed", "3") as served:
        yield served


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    runbooks = tmp_path / "runbooks"
    write_runbook(runbooks, ALERT, steps=READ, mitigation=SCALE)
    return runbooks


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[Cluster]:
    with cluster(tmp_path, deployment(1)) as found:
        yield found


def _client(
    folder: Path,
    tmp_path: Path,
    exporter_url: str,
    token: str | None,
    kube: Cluster | None = None,
    **kwargs: Any,
) -> tuple[TestClient, AuditLog, Cluster | None]:
    audit = AuditLog(tmp_path / "audit.jsonl", echo=io.StringIO())
    values = {"exporter_url": exporter_url, "timeout_seconds": 5}
    ctx = kube.ctx(**values) if kube is not None else RunContext(**values)
    tokens = ChangeTokens((("alice", token),)) if token else None
    app = create_runbook_app(folder, ctx, tokens=tokens, audit=audit, **kwargs)
    return TestClient(app), audit, kube


def _run(client: TestClient, step_id: str, labels: dict[str, str], **kwargs: Any) -> Any:
    execute = kwargs.pop("execute", False)
    return client.post(
        f"/runbooks/{ALERT}/steps/{step_id}/run", json={"labels": labels, "execute": execute}, **kwargs
    )


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_index_lists_every_runbook(tmp_path: Path) -> None:
    folder = runbooks_dir(None)
    found, errors = load_runbooks(folder)
    assert not errors and len(found) > 10
    client, _, _ = _client(folder, tmp_path, "http://127.0.0.1:9", None)
    answer = client.get("/runbooks")
    assert answer.status_code == 200
    for runbook in found:
        assert f'href="runbooks/{runbook.alert}"' in answer.text
    assert client.get("/runbooks/NoSuchAlert").status_code == 404
    assert client.get("/runbooks/%3Cscript%3E").status_code == 404
    assert "<script>" not in client.get("/runbooks/%3Cscript%3E").text


def test_page_binds_and_escapes(folder: Path, tmp_path: Path) -> None:
    incidents = [
        {"id": "<b>i1</b>", "status": "firing", "starts_at": "now", "labels": {}, "url": "javascript:x"}
    ]
    client, _, _ = _client(folder, tmp_path, "http://127.0.0.1:9", None, incidents=lambda alert: incidents)
    hostile = "<script>alert(1)</script>"
    answer = client.get(f"/runbooks/{ALERT}", params={"gpu": "0", "namespace": hostile, "x": '"></a>'})
    assert answer.status_code == 200
    text = answer.text
    assert "<script>alert(1)" not in text and '"></a>' not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "gpu_snapshot(gpu=&#39;0&#39;)" in text  # bound from the label
    assert "invalid parameter &#39;namespace&#39;" in text  # the hostile value, refused by its type
    assert 'id="memory-curve"' in text and "TestAlert/memory.svg?gpu=0" in text
    assert "&lt;b&gt;i1&lt;/b&gt;" in text and "javascript:" not in text
    assert "Dry run" in text and 'class="execute"' in text
    assert "nonce-" in answer.headers["content-security-policy"]
    # a missing label is named
    missing = client.get(f"/runbooks/{ALERT}").text
    assert "needs the alert label(s) &#39;gpu&#39;" in missing and 'id="memory-curve"' not in missing


def test_markdown_escapes_everything() -> None:
    out = markdown("# T <i>\n\n- a `<b>` **x**\n- b\n\n1. one\n\n```\n<script>\n```\ntext & <img>")
    assert "<h3>T &lt;i&gt;</h3>" in out
    flat = out.replace("\n", "")
    assert "<ul><li>a <code>&lt;b&gt;</code> <strong>x</strong></li><li>b</li></ul>" in flat
    assert "<ol><li>one</li></ol>" in flat
    assert "<pre><code>&lt;script&gt;</code></pre>" in flat
    assert "<p>text &amp; &lt;img&gt;</p>" in out


@pytest.mark.e2e
def test_read_step_runs_without_token(folder: Path, tmp_path: Path, exporter: Served) -> None:
    client, audit, _ = _client(folder, tmp_path, exporter.base, TOKEN)
    answer = _run(client, "snapshot", {"gpu": "0"})
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["ok"] is True and result["step"] == "snapshot" and result["kind"] == "read"
    assert "GPU 0" in result["output"]
    assert audit.records() == []  # read steps are not audited
    assert _run(client, "nope", {"gpu": "0"}).status_code == 404
    missing = _run(client, "snapshot", {})
    assert missing.status_code == 422 and "'gpu'" in missing.json()["detail"]


@pytest.mark.e2e
def test_memory_svg_is_proxied(folder: Path, tmp_path: Path, exporter: Served) -> None:
    client, _, _ = _client(folder, tmp_path, exporter.base, None)
    answer = client.get(f"/runbooks/{ALERT}/memory.svg", params={"gpu": "0"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("image/svg+xml")
    assert answer.text.lstrip().startswith("<svg") or "<svg" in answer.text[:200]
    assert client.get(f"/runbooks/{ALERT}/memory.svg", params={"gpu": "$(id)"}).status_code == 422


def test_change_step_refused_without_configured_token(folder: Path, tmp_path: Path, kube: Cluster) -> None:
    client, audit, _ = _client(folder, tmp_path, "http://127.0.0.1:9", None, kube)
    answer = _run(client, "scale-out", {"namespace": "serving"}, execute=True, headers=_bearer(TOKEN))
    assert answer.status_code == 403
    assert "--token-file" in answer.json()["detail"] and "SERVESCOPE_RUNBOOK_TOKEN" in answer.json()["detail"]
    assert kube.api.requests == []
    assert audit.records() == []  # refused: counted, never an audit record


def test_change_step_missing_or_wrong_token(folder: Path, tmp_path: Path, kube: Cluster) -> None:
    client, audit, _ = _client(folder, tmp_path, "http://127.0.0.1:9", TOKEN, kube)
    before = REFUSED.labels("refused_bad_token")._value.get()
    assert _run(client, "scale-out", {"namespace": "serving"}, execute=True).status_code == 401
    wrong = _run(client, "scale-out", {"namespace": "serving"}, execute=True, headers=_bearer("guess"))
    assert wrong.status_code == 401
    basic = _run(client, "scale-out", {"namespace": "serving"}, headers={"Authorization": f"Basic {TOKEN}"})
    assert basic.status_code == 401
    assert kube.api.requests == [] and audit.records() == []
    assert REFUSED.labels("refused_bad_token")._value.get() == before + 1


@pytest.mark.e2e
def test_change_step_dry_run_then_execute(folder: Path, tmp_path: Path, kube: Cluster) -> None:
    client, audit, _ = _client(folder, tmp_path, "http://127.0.0.1:9", TOKEN, kube)
    dry = _run(client, "scale-out", {"namespace": "serving"}, headers=_bearer(TOKEN))
    assert dry.status_code == 200, dry.text
    assert dry.json()["ok"] is True and dry.json()["dry_run"] is True
    assert '"replicas": 5' in dry.json()["output"]
    assert kube.api.changes() == []
    done = _run(client, "scale-out", {"namespace": "serving"}, execute=True, headers=_bearer(TOKEN))
    assert done.status_code == 200, done.text
    assert done.json()["ok"] is True and done.json()["dry_run"] is False
    assert kube.changes() == [("PATCH", "/apis/apps/v1/namespaces/serving/deployments/vllm/scale")]
    records = audit.records()
    assert [r["outcome"] for r in records] == ["accepted", "dry_run", "accepted", "executed"]
    assert [r["seq"] for r in records] == [1, 2, 3, 4]
    assert records[1]["parameters"] == {
        "namespace": "serving",
        "deployment": "vllm",
        "add": 4,
        "allow_decrease": False,
        "allow_zero": False,
    }
    assert records[1]["caller"] == {"identity": "alice", "host": "testclient", "token": fingerprint(TOKEN)}


def test_audit_lines_are_chained_json_without_the_token(folder: Path, tmp_path: Path, kube: Cluster) -> None:
    client, audit, _ = _client(folder, tmp_path, "http://127.0.0.1:9", TOKEN, kube)
    _run(client, "scale-out", {"namespace": "serving"}, headers=_bearer(TOKEN))
    _run(client, "scale-out", {"namespace": "serving"}, headers=_bearer(TOKEN + "x"))
    _run(client, "scale-out", {"namespace": "serving"})
    _run(client, "scale-out", {"namespace": "serving", "note": TOKEN}, headers=_bearer(TOKEN))
    raw = audit.path.read_text()
    lines = raw.splitlines()
    assert len(lines) == 4  # two accepted requests: `accepted` before each run, its outcome after
    fields = {"seq", "prev", "time", "caller", "alert", "step", "parameters", "execute", "outcome", "message"}
    for line in lines:
        record = json.loads(line)
        assert fields <= set(record)
        assert record["time"].endswith("Z") and record["alert"] == ALERT and record["step"] == "scale-out"
    assert verify(lines)[0] == []
    # the token only appears where the caller put it into a label, never from the Authorization header
    assert raw.count(TOKEN) == 1 and '"note": "' + TOKEN in raw


def test_injection_labels_are_refused(folder: Path, tmp_path: Path, kube: Cluster) -> None:
    client, audit, _ = _client(folder, tmp_path, "http://127.0.0.1:9", TOKEN, kube)
    sentinel = tmp_path / "SENTINEL"
    for value in corpus(sentinel):
        if value == "-rf":  # a valid Kubernetes name would be scaled (dry run): not an injection
            continue
        for execute in (False, True):
            answer = _run(client, "scale-out", {"namespace": value}, execute=execute, headers=_bearer(TOKEN))
            assert answer.status_code == 422, (value[:40], answer.text)
        read = _run(client, "snapshot", {"gpu": value})
        assert read.status_code == 422, (value[:40], read.text)
    assert not sentinel.exists() and kube.api.requests == []
    # The 10 000-character value is over the label size limit: a malformed request, refused before binding.
    records = audit.records()
    assert {r["outcome"] for r in records} == {"failed", "malformed"}
    assert all(r["message"].startswith("invalid parameters") for r in records if r["outcome"] == "failed")
    assert all("at most 1024" in r["message"] for r in records if r["outcome"] == "malformed")


def test_router_mounts_in_another_app(folder: Path, tmp_path: Path) -> None:
    app = FastAPI()
    audit = AuditLog(tmp_path / "audit.jsonl")
    app.include_router(runbook_router(Pages(folder, lambda _: RunContext(), None, audit)))
    client = TestClient(app)
    assert client.get("/runbooks").status_code == 200
    assert client.get(f"/runbooks/{ALERT}?gpu=0").status_code == 200


@pytest.mark.e2e
def test_the_exporter_serves_no_runbooks(exporter: Served) -> None:
    import httpx

    assert httpx.get(f"{exporter.base}/runbooks").status_code == 404
    assert httpx.get(f"{exporter.base}/runbooks/ServescopeGpuSaturated").status_code == 404
    answer = httpx.post(
        f"{exporter.base}/runbooks/ServescopeGpuSaturated/steps/gpu-snapshot/run",
        json={"labels": {"gpu": "0"}, "execute": False},
        timeout=20,
    )
    assert answer.status_code == 404, answer.text
