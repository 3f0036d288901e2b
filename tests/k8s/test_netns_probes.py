"""Nothing but an engine's API server is ever connected to, and discovery that may not look says so.

Pods are network namespaces (tests/k8s/netns.py), the exporter is the real `servescope serve` in a child
of this test process, its NVML a fake naming the pods' PIDs (fake_nvml_serve.py); every listener counts
the connections and bytes it receives (listener.py)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from servescope.exporter.vllm.procfs import ProcFs
from tests.k8s.netns import pod_namespace
from tests.k8s.peers import Listener, fake_nvml_exporter, listener_argv, start_engine, wait_recorded
from tests.support import Served, stop, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
NOBODY = 65534


@contextmanager
def own_service() -> Iterator[list[int]]:
    """An unrelated service in this process, the exporter's parent: [connections accepted, port]."""
    sock = socket.create_server(("0.0.0.0", 0))
    seen = [0, sock.getsockname()[1]]

    def accept() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            seen[0] += 1
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield seen
    finally:
        sock.close()


def gauge(text: str, name: str, **labels: str) -> float | None:
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{{wanted}}} ") or (not labels and line.startswith(f"{name} ")):
            return float(line.rsplit(" ", 1)[1])
    return None


def metrics_when(served: Served, **outcomes: int) -> str | None:
    """/metrics once discovery counts these GPU processes per outcome, else None."""
    text = httpx.get(served.base + "/metrics").text
    name = "servescope_vllm_discovery_gpu_processes"
    held = all(gauge(text, name, reason=reason) == n for reason, n in outcomes.items())
    return text if held else None


def real_uid(served: Served) -> int:
    assert served.child.process is not None
    status = Path(f"/proc/{served.child.process.pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])


def test_a_training_job_and_a_service_above_the_exporter_receive_nothing(tmp_path: Path) -> None:
    records = {name: tmp_path / f"{name}.rec" for name in ("store", "rank0", "rank1", "engine")}
    job = (
        f"({listener_argv(records['rank0'], title='python train.py --local-rank 0')}) & "
        f"({listener_argv(records['rank1'], title='python train.py --local-rank 1')}) & "
        + listener_argv(records["store"], title="torchrun --nproc-per-node 2 train.py")
    )
    with own_service() as service, pod_namespace(61) as training, pod_namespace(62) as serving:
        torchrun, _ = training.start(["bash", "-c", job], r"listening on (\d+)", "the training job")
        wait_recorded(records["store"], records["rank0"], records["rank1"])
        ranks = sorted(ProcFs("/proc").children().get(torchrun.pid, []))
        engine = start_engine(serving, records["engine"])
        served = fake_nvml_exporter([*ranks, engine.pid])
        try:
            text = wait_for(
                "discovery's outcome and two scrapes of the engine",
                lambda: metrics_when(served, scraped=1) if engine.counts()[0] >= 3 else None,
                timeout=45,
                every=0.5,
            )
        finally:
            stop(served)
        listeners = {name: Listener(0, 0, record).counts() for name, record in records.items()}
    assert len(ranks) == 2
    assert gauge(text, "servescope_vllm_discovery_gpu_processes", reason="not_an_engine") == 2
    assert listeners["store"] == listeners["rank0"] == listeners["rank1"] == (0, 0)
    assert service[0] == 0  # the service in the exporter's own parent: never connected to
    connections, received = listeners["engine"]
    assert connections >= 3 and received > 0  # the engine beside them was probed and scraped
    print(f"connections/bytes received: {listeners}, parent's service {service[0]}")


def test_ptrace_denied_is_said_with_its_fix_and_nothing_is_probed(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root, to run the exporter as another UID")
    record = tmp_path / "engine.rec"
    with pod_namespace(63) as pod:
        engine = start_engine(pod, record)  # root's, with every capability
        denied = fake_nvml_exporter([engine.pid], as_uid=NOBODY)
        try:
            text = wait_for(
                "the ptrace_denied outcome", lambda: metrics_when(denied, ptrace_denied=1), 30, 0.5
            )
            ready = httpx.get(denied.base + "/readyz")
            sources = httpx.get(denied.base + "/api/v1/sources").json()["sources"]["vllm"]
            uid = int(
                next(
                    line
                    for line in Path(f"/proc/{denied.child.process.pid}/status").read_text().splitlines()
                    if line.startswith("Uid:")
                ).split()[1]
            )  # type: ignore[union-attr]
            log = denied.log()
        finally:
            stop(denied)
        untouched = engine.counts()
        root = fake_nvml_exporter([engine.pid])  # the same exporter as root: the engine is scraped
        try:
            wait_for("the engine scraped as root", lambda: metrics_when(root, scraped=1), 30, 0.5)
        finally:
            stop(root)
    assert uid == NOBODY
    assert gauge(text, "servescope_vllm_discovered_endpoints") == 0
    assert ready.status_code == 503 and "ptrace_denied" in ready.json()["failing"]["vllm"]
    [entry] = sources["not_scraped"]
    assert entry["reason"] == "ptrace_denied" and f"pid {engine.pid}" in entry["detail"]
    assert "CAP_SYS_PTRACE" in entry["hint"] and "AppArmor" in entry["hint"]
    assert "serving engine not scraped (ptrace_denied)" in log and "AppArmor" in log
    assert untouched == (0, 0)
