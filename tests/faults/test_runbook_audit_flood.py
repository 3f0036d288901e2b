"""4,000 token-less requests cannot remove or alter one audit record; `audit verify` finds a deleted line.

Before this, 2,220 refused requests of ~15 KB rotated the audit log twice in 25 s and a real change
request's record was gone from both files. Now only callers with a valid token make records: the
trail's bytes after the flood are the bytes before it, and the flood is counted in metrics instead.
The flood is nearly twice the one that did the damage (one record of any of its requests would fail
the test); 10,000 proved no more and took a fifth of a busy machine's minute of CPU.

Rerun: .venv/bin/python -m pytest tests/faults/test_runbook_audit_flood.py -q -n 0 -s
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import httpx
import pytest

from servescope.runbooks.audit import verify
from tests.faults.runbook_peers import ALERT, TOKEN, run_step, runbook_server
from tests.runbook.cli_peers import invoke
from tests.runbook.kube_fakes import cluster, node

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
REQUESTS = 4_000
CLIENTS = 8
# ~15 KB each, as in the report: 14 labels of 1,000 characters.
LABELS = {f"label{i}": "v" * 1000 for i in range(14)}


def _flood(base: str, share: int, sent: list[int]) -> None:
    run = f"/runbooks/{ALERT}/steps/cordon/run"
    body = json.dumps({"labels": {**LABELS, "node": "n1"}, "execute": True}).encode()
    kinds = [
        (run, {"Authorization": "Bearer guess"}, body),  # a wrong token
        (run, {}, body),  # no token
        (run, {}, b"{not json" + body),  # malformed, no token
        (f"/runbooks/{ALERT}/steps/nope/run", {"Authorization": "Bearer guess"}, body),  # unknown step
    ]
    transport = httpx.HTTPTransport(local_address="127.0.0.2")  # the flood's own host
    with httpx.Client(base_url=base, timeout=30, transport=transport) as client:
        for n in range(share):
            path, headers, content = kinds[n % len(kinds)]
            answer = client.post(
                path, content=content, headers={"Content-Type": "application/json", **headers}
            )
            assert answer.status_code in (401, 404, 422, 503), answer.text
            sent[0] += 1


def test_four_thousand_token_less_requests_leave_every_record_as_it_was(tmp_path: Path) -> None:
    with cluster(tmp_path, node("n1")) as kube, runbook_server(tmp_path / "service", kube=kube) as server:
        assert run_step(server.base, "cordon", {"node": "n1"}, token=TOKEN).status_code == 200  # a real one
        trail = tmp_path / "service" / "audit.jsonl"
        before = trail.read_bytes()
        sent = [0]
        started = time.monotonic()
        threads = [
            threading.Thread(target=_flood, args=(server.base, REQUESTS // CLIENTS, sent))
            for _ in range(CLIENTS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(600)
        seconds = time.monotonic() - started
        after = trail.read_bytes()
        metrics = httpx.get(f"{server.base}/incidents/metrics").text
    refused = sum(
        float(v) for v in re.findall(r"servescope_runbook_refused_requests_total\{[^}]*\} (\S+)", metrics)
    )
    records = [json.loads(line) for line in after.decode().splitlines()]
    print(
        f"{sent[0]} token-less requests of ~15 KB in {seconds:.0f} s: {refused:.0f} counted as refused; "
        f"the trail holds {len(records)} records, byte for byte as before"
    )
    assert sent[0] == REQUESTS
    assert after == before and [r["outcome"] for r in records] == ["accepted", "dry_run"]
    assert refused >= REQUESTS
    assert verify(after.decode().splitlines())[0] == []


def test_audit_verify_detects_a_deleted_line_of_the_services_trail(tmp_path: Path) -> None:
    nodes = [node(name) for name in ("n1", "n2", "n3")]
    with cluster(tmp_path, *nodes) as kube, runbook_server(tmp_path / "service", kube=kube) as server:
        for name in ("n1", "n2", "n3"):
            assert run_step(server.base, "cordon", {"node": name}, token=TOKEN).status_code == 200
    trail = tmp_path / "service" / "audit.jsonl"
    assert invoke("audit", "verify", str(trail)).exit_code == 0
    lines = trail.read_text().splitlines()
    trail.write_text("\n".join(lines[:2] + lines[3:]) + "\n")  # record 3: n2's `accepted`
    result = invoke("audit", "verify", str(trail))
    print(result.stderr.strip())
    assert result.exit_code == 1 and "line 3: record 4 where record 3 was due" in result.stderr
