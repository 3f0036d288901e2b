"""A read step for node-b's GPU is answered by node-b's exporter, with three exporters behind one Service.

Three nodes are network-namespace pods, each running `servescope serve --simulate` with its own name and
seed (so its own GPU UUIDs); a round-robin TCP proxy stands for the exporters' Service; a real Prometheus
scrapes each pod with `instance` set to the node's name, as the rendered ServiceMonitor does. The runbook
service is configured as `deploy render` configures it (--exporter-url the Service, --exporter-per-instance,
--prometheus-url). Through the Service, node-b's GPU is found only when the proxy happens to pick node-b;
through the targets, every time.

Rerun: .venv/bin/python -m pytest tests/runbook/test_node_evidence.py -q -n 0 -s
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest

from tests.k8s.netns import Pod, pod_namespace
from tests.runbook.cluster_peers import prometheus, round_robin_service, servescope_in, started
from tests.runbook.fakes import step, write_runbook
from tests.support import SERVESCOPE

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
NODES = ("node-a", "node-b", "node-c")
ALERT = "EvidenceAlert"
SERVING = r"serving .* on \S+:(\d+)"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, dict[str, str]]]:
    """(the runbook service's URL, the Service's URL, node name -> the UUID of its GPU 0)."""
    folder = tmp_path_factory.mktemp("evidence")
    with ExitStack() as stack:
        pods: dict[str, Pod] = {}
        for index, node in enumerate(NODES):
            pod = pods[node] = stack.enter_context(pod_namespace(index))
            argv = servescope_in(
                pod.name, "serve", "--simulate", "--gpus", "2", "--engines", "1", "--hostname", node,
                "--seed", str(11 + index), "--listen", "0.0.0.0:9108", "--no-discovery",
            )  # fmt: skip
            stack.enter_context(started(argv, folder / f"{node}.log", SERVING))
        uuids = {node: _uuid_of_gpu0(f"http://{pod.address}:9108") for node, pod in pods.items()}
        assert len(set(uuids.values())) == 3, uuids
        service = stack.enter_context(round_robin_service([(p.address, 9108) for p in pods.values()]))
        prom = stack.enter_context(
            prometheus(folder / "prometheus", {f"{p.address}:9108": n for n, p in pods.items()})
        )
        runbooks = folder / "runbooks"
        write_runbook(
            runbooks, ALERT, steps=step("snapshot", "read", "gpu_snapshot", 'gpu: "{{ labels.uuid }}"')
        )
        argv = [
            SERVESCOPE, "runbook-server", "--listen", "127.0.0.1:0", "--runbooks", str(runbooks),
            "--exporter-url", f"http://127.0.0.1:{service}", "--exporter-per-instance",
            "--prometheus-url", prom, "--exporter-job", "servescope",
            "--incidents-db", str(folder / "incidents.sqlite"), "--audit-log", str(folder / "audit.jsonl"),
        ]  # fmt: skip
        found = stack.enter_context(
            started(argv, folder / "runbooks.log", r"runbook server on 127\.0\.0\.1:(\d+)")
        )
        yield f"http://127.0.0.1:{found.group(1)}", f"http://127.0.0.1:{service}", uuids


def _uuid_of_gpu0(exporter: str) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(
            r'servescope_gpu_info\{[^}]*gpu="0"[^}]*uuid="([^"]+)"', httpx.get(f"{exporter}/metrics").text
        )
        if found:
            return found.group(1)
        time.sleep(0.5)
    raise AssertionError(f"{exporter} exports no GPU 0")


def _snapshot(base: str, labels: dict[str, str]) -> dict[str, object]:
    answer = httpx.post(f"{base}/runbooks/{ALERT}/steps/snapshot/run", json={"labels": labels}, timeout=30)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_the_read_step_for_node_b_is_answered_by_node_b(cluster: tuple[str, str, dict[str, str]]) -> None:
    base, _, uuids = cluster
    answers = [_snapshot(base, {"instance": "node-b", "uuid": uuids["node-b"]}) for _ in range(6)]
    for answer in answers:
        assert answer["ok"] is True, answer["output"]
        assert answer["data"]["hostname"] == "node-b" and answer["data"]["uuid"] == uuids["node-b"]  # type: ignore[index]
    print(f"node-b's GPU {uuids['node-b']}: 6 of 6 read steps answered by node-b")


def test_through_the_service_another_node_would_answer(cluster: tuple[str, str, dict[str, str]]) -> None:
    """The ground truth the test rests on: the Service answers from every node in turn."""
    _, service, uuids = cluster
    answered = [httpx.get(f"{service}/api/v1/gpus", timeout=10).json()["gpus"][0]["uuid"] for _ in range(6)]
    assert set(answered) == set(uuids.values())


def test_a_node_prometheus_does_not_scrape_is_named_not_asked(
    cluster: tuple[str, str, dict[str, str]],
) -> None:
    base, _, uuids = cluster
    answer = _snapshot(base, {"instance": "node-z", "uuid": uuids["node-b"]})
    assert answer["ok"] is False
    assert "the exporter of instance 'node-z'" in str(answer["output"]) and "not known" in str(
        answer["output"]
    )
