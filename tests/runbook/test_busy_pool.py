"""A full step pool answers 503, but a change step's bad token is 401 in that state too."""

from __future__ import annotations

import io
import json
from pathlib import Path

from servescope.runbooks.actions import RunContext
from servescope.runbooks.audit import AuditLog
from servescope.runbooks.auth import ChangeTokens
from servescope.runbooks.runbook_routes import Pages
from servescope.runbooks.step_routes import Call, RunRequest, refused_while_busy
from tests.runbook.fakes import step, write_runbook

TOKEN = "the-change-token-0042"


def pages(tmp_path: Path) -> Pages:
    steps = step("snap", "read", "gpu_snapshot", 'gpu: "0"') + step(
        "cordon", "change", "cordon_node", 'node: "{{ labels.node }}"'
    )
    write_runbook(tmp_path / "runbooks", "BusyAlert", steps=steps)
    return Pages(
        folder=tmp_path / "runbooks",
        ctx_factory=lambda request: RunContext(),
        tokens=ChangeTokens((("alice", TOKEN),)),
        audit=AuditLog(tmp_path / "audit.jsonl", echo=io.StringIO()),
    )


def call(step_id: str, presented: str | None) -> Call:
    body = RunRequest(labels={"node": "n1"}, execute=True)
    return Call("BusyAlert", step_id, "127.0.0.1", presented, body, RunContext())


def outcomes(tmp_path: Path) -> list[str]:
    path = tmp_path / "audit.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line)["outcome"] for line in lines]


def test_a_bad_token_is_401_even_while_the_pool_is_full(tmp_path: Path) -> None:
    board = pages(tmp_path)
    assert refused_while_busy(board, call("cordon", "wrong"), "full").status_code == 401
    assert refused_while_busy(board, call("cordon", None), "full").status_code == 401
    assert outcomes(tmp_path) == []  # nobody authenticated: counted, not recorded


def test_a_good_token_or_a_read_step_gets_503_to_retry(tmp_path: Path) -> None:
    board = pages(tmp_path)
    busy = refused_while_busy(board, call("cordon", TOKEN), "full")
    assert busy.status_code == 503 and busy.headers["Retry-After"] == "5"
    assert refused_while_busy(board, call("snap", "wrong"), "full").status_code == 503
    assert outcomes(tmp_path) == ["refused_busy"]  # the authenticated one only
