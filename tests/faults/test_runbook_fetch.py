"""H1: a read step is no fetch proxy: only trusted hosts are asked, within a total deadline and a byte cap.

Rerun: .venv/bin/python -m pytest tests/faults/test_runbook_fetch.py -q -n 0
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import pytest

from tests.faults.runbook_peers import (
    ALERT,
    NOT_FOUND,
    WEBHOOK_TOKEN,
    ParallelRuns,
    fake_prometheus,
    hostile_peer,
    run_step,
    runbook_server,
)
from tests.runbook.webhook.notices import alert, payload
from tests.support import free_port, generous

pytestmark = pytest.mark.e2e
MIB = 1024


def test_an_endless_answer_is_refused_at_the_cap_while_it_streams(tmp_path: Path) -> None:
    with hostile_peer("endless") as peer, runbook_server(tmp_path, "--exporter-url", peer.url) as server:
        before = server.vm_hwm_kib()
        started = time.monotonic()
        answer = run_step(server.base, "snapshot", {"gpu": "0"})
        elapsed = time.monotonic() - started
        peak = server.vm_hwm_kib()
    assert answer.status_code == 200 and answer.json()["ok"] is False
    assert "refused at the cap" in answer.json()["output"], answer.json()["output"]
    print(f"endless answer: refused after {elapsed:.2f} s; VmHWM {before // MIB} -> {peak // MIB} MiB")
    assert peak - before < 32 * MIB  # the cap is 8 MiB: the whole answer was never held


def test_a_trickling_answer_ends_at_the_total_deadline(tmp_path: Path) -> None:
    with (
        hostile_peer("trickle") as peer,
        runbook_server(tmp_path, "--exporter-url", peer.url, "--timeout", "3") as server,
    ):
        started = time.monotonic()
        answer = run_step(server.base, "snapshot", {"gpu": "0"})
        elapsed = time.monotonic() - started
    assert "total deadline" in answer.json()["output"], answer.json()["output"]
    print(f"trickling answer: refused after {elapsed:.2f} s (--timeout 3)")
    assert elapsed < generous(3)  # the trickle (a byte every 1.5 s) never ends by itself


def _free_port_on(*hosts: str) -> int:
    """A port free on every one of these loopback addresses."""
    for _ in range(50):
        port = free_port(hosts[0])
        try:
            for host in hosts:
                socket.create_server((host, port)).close()
        except OSError:
            continue
        return port
    raise AssertionError("no port free on every loopback address")


def test_only_prometheus_targets_and_the_allowlist_are_asked(tmp_path: Path) -> None:
    port = _free_port_on("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4")
    with (
        hostile_peer("endless", "127.0.0.2", port) as stranger,
        hostile_peer("fixed", "127.0.0.3", port, NOT_FOUND) as target,
        hostile_peer("fixed", "127.0.0.4", port, NOT_FOUND) as allowed,
        fake_prometheus([f"127.0.0.3:{port}"]) as prometheus,
        runbook_server(
            tmp_path,
            "--exporter-url", f"http://127.0.0.1:{port}", "--exporter-per-instance",
            "--prometheus-url", prometheus.url, "--exporter-allow", "127.0.0.4/32",
        ) as server,
    ):  # fmt: skip
        refused = run_step(server.base, "snapshot", {"gpu": "0", "instance": f"127.0.0.2:{port}"}).json()
        asked = run_step(server.base, "snapshot", {"gpu": "0", "instance": f"127.0.0.3:{port}"}).json()
        also = run_step(server.base, "snapshot", {"gpu": "0", "instance": f"127.0.0.4:{port}"}).json()
        metrics = httpx.get(f"{server.base}/incidents/metrics").text
        audit = server.audit()
    assert refused["ok"] is False and "has no active target of job 'servescope'" in refused["output"]
    assert stranger.connections == 0
    assert target.connections == 1 and "HTTP 404" in asked["output"]
    assert allowed.connections == 1 and "HTTP 404" in also["output"]
    assert 'servescope_runbook_instance_refused_total{reason="untrusted"} 1.0' in metrics
    # A read step anyone may run is no audit record: its refusal is counted (and logged, rate-limited).
    assert audit == []
    assert 'servescope_runbook_refused_requests_total{reason="refused_target"} 1.0' in metrics


@pytest.mark.parametrize(
    "host",
    ["169.254.169.254", "[fe80::1]", "metadata.google.internal", "[::ffff:169.254.169.254]", "2852039166"],
)
def test_link_local_and_metadata_are_refused_before_any_connection(tmp_path: Path, host: str) -> None:
    with runbook_server(
        tmp_path,
        "--exporter-url", "http://127.0.0.1:9108", "--exporter-per-instance", "--timeout", "60",
        "--exporter-allow", "0.0.0.0/0", "--exporter-allow", "::/0", "--exporter-allow", "*",
    ) as server:  # fmt: skip
        started = time.monotonic()
        answer = run_step(server.base, "snapshot", {"gpu": "0", "instance": f"{host}:9108"}).json()
        elapsed = time.monotonic() - started
        metrics = httpx.get(f"{server.base}/incidents/metrics").text
    assert ": never asked" in answer["output"] and (
        "link-local" in answer["output"] or "metadata" in answer["output"]
    )
    # A connection to a black-holed 169.254.169.254 would wait for the 60 s timeout.
    assert elapsed < generous(0), elapsed
    assert 'servescope_runbook_instance_refused_total{reason="link_local"} 1.0' in metrics


def test_every_worker_reading_an_endless_answer_fits_the_memory_limit(tmp_path: Path) -> None:
    """The worst case the Deployment's memory limit is sized from: the 8 page workers and the 4
    incident workers all streaming an endless answer at once."""
    hook = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
    with hostile_peer("endless") as peer, runbook_server(tmp_path, "--exporter-url", peer.url) as server:
        before = server.vm_hwm_kib()
        runs = ParallelRuns(server.base, 8)
        for number in range(4):
            fired = alert(fingerprint=f"{number:016x}", alertname=ALERT)
            httpx.post(f"{server.base}/alertmanager/webhook", json=payload(fired), headers=hook)
        answers = runs.join()
        time.sleep(3)  # the incidents' read steps finish too
        peak = server.vm_hwm_kib()
    print(f"12 endless answers at once: VmHWM {before // MIB} -> {peak // MIB} MiB")
    assert all("refused at the cap" in a.json()["output"] for a in answers)
    assert peak < 256 * MIB * 0.8  # the Deployment's limit (256 Mi), with 20 % to spare


def test_without_an_answer_from_prometheus_no_instance_is_asked(tmp_path: Path) -> None:
    port = _free_port_on("127.0.0.1", "127.0.0.2")
    with (
        hostile_peer("fixed", "127.0.0.2", port, NOT_FOUND) as stranger,
        hostile_peer("trickle") as prometheus,
        runbook_server(
            tmp_path,
            "--exporter-url", f"http://127.0.0.1:{port}", "--exporter-per-instance", "--timeout", "2",
            "--prometheus-url", prometheus.url,
        ) as server,
    ):  # fmt: skip
        labels = {"gpu": "0", "instance": f"127.0.0.2:{port}"}
        answer = run_step(server.base, "snapshot", labels).json()
        again = run_step(server.base, "snapshot", labels).json()
        metrics = httpx.get(f"{server.base}/incidents/metrics").text
    assert "cannot ask Prometheus" in answer["output"] and "total deadline" in answer["output"], answer
    # The failure is remembered a while: the second run did not ask Prometheus again.
    assert again["output"] == answer["output"]
    assert stranger.connections == 0 and prometheus.connections == 1
    assert 'servescope_runbook_instance_refused_total{reason="targets_unknown"} 2.0' in metrics
