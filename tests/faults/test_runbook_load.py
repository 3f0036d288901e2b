"""H2, M1, M5: slow peers, large bodies and half-sent connections leave the runbook service answering.

What is asserted is behaviour: answers come beside the hung work, not after it (the hung step runs are
still waiting, the half-sent connections still held, when they come), and bodies are cut at their
deadline. How fast is printed (run with -s), with the service's VmHWM and its open fds; bounds on waits
allow for a busy machine (tests/support/bounds.py).
Rerun: .venv/bin/python -m pytest tests/faults/test_runbook_load.py -q -n 0 -s
"""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.faults.runbook_peers import (
    ALERT,
    TOKEN,
    WEBHOOK_TOKEN,
    ParallelRuns,
    hostile_peer,
    runbook_server,
)
from tests.runbook.webhook.notices import alert, payload
from tests.support import generous, wait_for

pytestmark = pytest.mark.e2e
MIB = 1024


def _timed(call: Callable[[], httpx.Response]) -> tuple[float, int]:
    started = time.monotonic()
    status = call().status_code
    return time.monotonic() - started, status


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def test_forty_trickling_read_steps_leave_health_pages_and_webhook_answering(tmp_path: Path) -> None:
    hook = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
    # The runs wait on the trickling exporter for their whole 10 s deadline: every answer below must
    # come while all of them are still waiting, a window a busy machine does not close.
    with (
        hostile_peer("trickle") as peer,
        # 41 clients from one address: this test is about the step pool, not the per-address cap.
        runbook_server(
            tmp_path, "--exporter-url", peer.url, "--timeout", "10", "--max-connections-per-ip", "100"
        ) as server,
        httpx.Client(base_url=server.base, timeout=10) as client,
    ):
        runs = ParallelRuns(server.base, 40)
        time.sleep(1.0)  # every worker is now waiting on the trickling exporter
        health = [_timed(lambda: client.get("/healthz")) for _ in range(40)]
        others = [
            _timed(lambda: client.get("/runbooks")),
            _timed(lambda: client.get(f"/runbooks/{ALERT}?gpu=0")),
            _timed(lambda: client.get("/incidents")),
            _timed(lambda: client.post("/alertmanager/webhook", json=payload(alert()), headers=hook)),
        ]
        busy = peer.connections
        returned_meanwhile = len(runs.answers)
        answers = runs.join()
    latencies = [seconds for seconds, _ in health]
    print(
        f"/healthz with {busy} step runs on the trickling exporter: "
        f"p50 {statistics.median(latencies) * 1000:.0f} ms, p95 {_p95(latencies) * 1000:.0f} ms; "
        "pages and webhook: " + ", ".join(f"{s * 1000:.0f} ms ({code})" for s, code in others)
    )
    assert all(code == 200 for _, code in health + others), others
    assert returned_meanwhile == 0, f"{returned_meanwhile} step runs had ended: the answers waited on them"
    assert len(answers) == 40 and all("total deadline" in a.json()["output"] for a in answers)


def _refused_early(base: str, head: str, body: bytes) -> tuple[str, int, float]:
    """Send the head, then the body for as long as the server reads it: (status line, bytes sent, s)."""
    host, port = base.removeprefix("http://").split(":")
    sent, started = 0, time.monotonic()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode())
        try:
            while sent < 52_000_000:
                sock.sendall(body)
                sent += len(body)
        except OSError:
            pass
        try:
            answer = sock.recv(4096).decode(errors="replace")
        except OSError:
            answer = ""
    return answer.split("\r\n")[0], sent, time.monotonic() - started


def test_large_bodies_are_refused_before_they_are_read(tmp_path: Path) -> None:
    run = f"/runbooks/{ALERT}/steps/cordon/run"
    head = (
        f"POST {run} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Type: application/json\r\n"
    )
    declared = head + "Content-Length: 52000000\r\n\r\n"
    chunked = head + "Transfer-Encoding: chunked\r\n\r\n"
    chunk = b"%x\r\n" % 1_048_576 + b" " * 1_048_576 + b"\r\n"
    labels = json.dumps({"labels": {f"l{i}": "v" * 10 for i in range(50_000)}}).encode()
    with runbook_server(tmp_path) as server:
        before = server.vm_hwm_kib()
        results = [_refused_early(server.base, declared, b" " * 1_048_576) for _ in range(4)]
        results += [_refused_early(server.base, chunked, chunk) for _ in range(4)]
        json_type = {"Content-Type": "application/json"}
        many = [httpx.post(f"{server.base}{run}", content=labels, headers=json_type) for _ in range(3)]
        peak = server.vm_hwm_kib()
        audit = (tmp_path / "audit.jsonl").stat().st_size
        outcomes = [r["outcome"] for r in server.audit()]
    for status, sent, seconds in results:
        print(f"{status}: after {sent / 2**20:.0f} MiB sent, {seconds * 1000:.0f} ms")
    print(f"VmHWM {before // MIB} -> {peak // MIB} MiB; audit trail {audit} bytes after 3 x 50 000 labels")
    assert all(status == "HTTP/1.1 413 Request Entity Too Large" for status, _, _ in results), results
    assert [answer.status_code for answer in many] == [401] * 3  # no token: refused, counted, not recorded
    assert peak - before < 32 * MIB
    # The 8 large bodies carried the valid token: each one bounded record; the 3 token-less ones none.
    assert outcomes == ["malformed"] * 8 and audit < 8 * 2_048


def _settled(count: Callable[[], int], above: int) -> Callable[[], int | None]:
    """A poll that answers `count()` once it is over `above` and two reads in a row agree: the server has
    taken the whole wave from its queue (shedding the oldest past its caps). Beside two CPU-bound
    neighbours it was still taking it half a second after the last was sent (88 held then, 42 by the
    probes), or had not begun (two reads of its idle count)."""
    last: list[int] = []

    def poll() -> int | None:
        last.append(count())
        return last[-1] if len(last) > 1 and last[-1] == last[-2] > above else None

    return poll


def test_three_hundred_half_sent_connections_leave_health_answering(tmp_path: Path) -> None:
    half = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    # A 30 s request timeout: the probes must be answered while the held connections are still open,
    # long before the timeout would have made room for them, however long a busy server takes the wave.
    with runbook_server(tmp_path, "--max-connections", "100", "--request-timeout", "30") as server:
        host, port = server.base.removeprefix("http://").split(":")
        baseline = server.fds()
        sockets = []
        for _ in range(300):
            sock = socket.create_connection((host, int(port)))
            sock.sendall(half)
            sockets.append(sock)
        held = wait_for(
            "the server done taking the wave", _settled(server.fds, baseline + 10), generous(10), every=0.5
        )
        seconds, status = _timed(lambda: httpx.get(f"{server.base}/healthz", timeout=generous(5)))
        pages = httpx.get(f"{server.base}/runbooks", timeout=generous(5)).status_code
        beside = server.fds()

        def closed_by_the_request_timeout() -> int | None:
            fds = server.fds()
            return fds if fds <= baseline + 5 else None

        after = wait_for("the held ones closed", closed_by_the_request_timeout, generous(30), every=0.5)
        peak = server.vm_hwm_kib()
        for sock in sockets:
            sock.close()
    print(
        f"300 half-sent connections: fds {baseline} -> {held} (cap 100), /healthz {seconds * 1000:.0f} ms, "
        f"fds {after} after the request timeout; VmHWM {peak // MIB} MiB"
    )
    assert status == 200 and pages == 200
    # Still held once answered (the probes may have evicted one or two): they came beside the held.
    assert held > baseline + 10 and beside >= held - 5, f"fds {held} held, {beside} once answered"
    assert held <= baseline + 100 + 5
    assert after <= baseline + 5


def test_two_hundred_concurrent_page_requests_leave_health_answering(tmp_path: Path) -> None:
    # 201 clients from one address: this test is about the thread pools, not the per-address cap. The
    # probe waits as long as the Deployment's (3 s) plus what a busy machine adds; how fast is printed.
    with (
        runbook_server(tmp_path, "--max-connections-per-ip", "1000", "--max-connections", "1000") as server,
        httpx.Client(base_url=server.base, timeout=generous(3)) as probe,
    ):
        statuses: list[int] = []

        def pages() -> None:
            with httpx.Client(base_url=server.base, timeout=30) as client:
                statuses.extend(client.get(f"/runbooks/{ALERT}?gpu=0").status_code for _ in range(3))

        threads = [threading.Thread(target=pages) for _ in range(200)]
        for thread in threads:
            thread.start()
        health = [_timed(lambda: probe.get("/healthz")) for _ in range(40)]
        for thread in threads:
            thread.join(60)
        peak = server.vm_hwm_kib()
    latencies = [seconds for seconds, _ in health]
    print(
        f"/healthz beside 200 concurrent page clients: p50 {statistics.median(latencies) * 1000:.0f} ms, "
        f"p95 {_p95(latencies) * 1000:.0f} ms; VmHWM {peak // MIB} MiB"
    )
    assert all(code == 200 for _, code in health)
    assert set(statuses) <= {200, 503} and statuses.count(200) >= 300


def test_a_body_sent_too_slowly_is_cut_off(tmp_path: Path) -> None:
    run = f"/runbooks/{ALERT}/steps/cordon/run"
    head = f"POST {run} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    with runbook_server(tmp_path) as server:
        host, port = server.base.removeprefix("http://").split(":")
        started = time.monotonic()
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(head.encode() + b'{"labels": ')
            try:
                answer = sock.recv(4096).decode(errors="replace")
            except ConnectionResetError:
                answer = ""
        elapsed = time.monotonic() - started
        outcomes = [r["outcome"] for r in server.audit()]
    print(f"a body stalled after 11 bytes: {answer.splitlines()[:1] or 'closed'} after {elapsed:.1f} s")
    # Head and body must arrive within --request-timeout (10 s) of the first byte: the connection is
    # closed then (or refused with the answer a missing token gets, if the app's own read timer wins).
    # The client would have waited 30 s for an answer.
    assert answer == "" or answer.startswith("HTTP/1.1 401")
    assert 9 < elapsed < generous(10) and outcomes == []


def test_a_full_step_pool_answers_503_and_counts_it(tmp_path: Path) -> None:
    one_worker = ("--timeout", "2", "--step-workers", "1")
    with (
        hostile_peer("trickle") as peer,
        runbook_server(tmp_path, "--exporter-url", peer.url, *one_worker) as server,
    ):
        answers = ParallelRuns(server.base, 8).join()
        outcomes = [r["outcome"] for r in server.audit()]
        metrics = httpx.get(f"{server.base}/incidents/metrics").text
    statuses = sorted(answer.status_code for answer in answers)
    # One running and four waiting (4 x --step-workers); the other three are refused at once.
    assert statuses == [200] * 5 + [503] * 3, statuses
    assert outcomes == []  # read steps anyone may run: counted, not recorded
    assert 'servescope_runbook_refused_requests_total{reason="refused_busy"} 3.0' in metrics
