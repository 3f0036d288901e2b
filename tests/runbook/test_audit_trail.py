"""The audit trail: append-only, hash-chained, shared by the service and the CLI's --execute, and
checked by `servescope runbook audit verify` (a removed or edited line is found)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from servescope.runbooks.audit import GENESIS, AuditLog, line_hash, verify
from tests.runbook.cli_peers import invoke
from tests.runbook.fakes import step, write_runbook
from tests.runbook.kube_fakes import cluster, node


def _trail(path: Path, records: int) -> list[str]:
    audit = AuditLog(path, echo=io.StringIO())
    for n in range(records):
        audit.record(
            host="10.0.0.1",
            identity="alice",
            token="t0ken",
            alert="A",
            step=f"s{n}",
            parameters={"n": n},
            labels={"node": "n1"},
            execute=True,
            outcome="executed",
            message="ok",
        )
    return path.read_text().splitlines()


def test_records_chain_and_each_is_echoed(tmp_path: Path) -> None:
    echo = io.StringIO()
    audit = AuditLog(tmp_path / "audit.jsonl", echo=echo)
    first = audit.record(host="h", identity="alice", token="t", alert="A", step="s", parameters=None,
                         labels=None, execute=False, outcome="accepted", message="m")  # fmt: skip
    second = audit.record(host="h", identity="bob", token="u", alert="A", step="s", parameters=None,
                          labels=None, execute=False, outcome="dry_run", message="m")  # fmt: skip
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    assert (first["seq"], first["prev"]) == (1, GENESIS) and (second["seq"], second["prev"]) == (
        2,
        line_hash(lines[0]),
    )
    assert echo.getvalue().splitlines() == lines  # stdout carries the same lines for the log collector
    assert verify(lines) == ([], 2, line_hash(lines[1]))


@pytest.mark.parametrize("damage", ["delete", "edit", "swap", "truncate-head"])
def test_verify_finds_a_deleted_edited_or_reordered_line(tmp_path: Path, damage: str) -> None:
    lines = _trail(tmp_path / "audit.jsonl", 5)
    head = line_hash(lines[-1])
    if damage == "delete":
        del lines[2]
    elif damage == "edit":
        record = json.loads(lines[1])
        record["outcome"] = "dry_run"
        lines[1] = json.dumps(record)
    elif damage == "swap":
        lines[1], lines[2] = lines[2], lines[1]
    else:
        del lines[0]
    problems, _, _ = verify(lines, head)
    assert problems, damage
    cut = verify(_trail(tmp_path / "other.jsonl", 3)[:-1], line_hash(_trail(tmp_path / "o2.jsonl", 3)[-1]))[0]
    assert cut and "not at the expected head" in cut[-1]  # the last line removed: found with --head


@pytest.mark.e2e
def test_audit_verify_command_passes_a_whole_trail_and_fails_a_cut_one(tmp_path: Path) -> None:
    lines = _trail(tmp_path / "audit.jsonl", 4)
    whole = invoke("audit", "verify", str(tmp_path / "audit.jsonl"))
    assert whole.exit_code == 0 and "4 record(s), chain whole" in whole.stdout, whole.output
    (tmp_path / "audit.jsonl").write_text("\n".join(lines[:1] + lines[2:]) + "\n")
    cut = invoke("audit", "verify", str(tmp_path / "audit.jsonl"))
    assert cut.exit_code == 1 and "record 3 where record 2 was due" in cut.stderr, cut.output


@pytest.mark.e2e
def test_execute_refuses_to_act_when_the_audit_trail_cannot_be_written(tmp_path: Path) -> None:
    write_runbook(
        tmp_path / "runbooks", "TestAlert", mitigation=step("cordon", "change", "cordon_node", "node: n1")
    )
    (tmp_path / "not-a-folder").write_text("a file")
    with cluster(tmp_path, node("n1")) as kube:
        args = ["run", "TestAlert", "--runbooks", str(tmp_path / "runbooks"), "--step", "cordon", "--execute",
                "--kube-api-url", kube.url, "--kube-token-file", str(kube.token_file)]  # fmt: skip
        refused = invoke(*args, "--audit-log", str(tmp_path / "not-a-folder" / "audit.jsonl"))
        assert refused.exit_code == 1 and "not executed: audit log" in refused.stderr, refused.output
        assert kube.api.changes() == []
        done = invoke(*args, "--audit-log", str(tmp_path / "audit.jsonl"))
        assert done.exit_code == 0, done.output
        assert kube.changes() == [("PATCH", "/api/v1/nodes/n1")]
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in records] == ["accepted", "executed"]
