"""Cordon, drain and scale act from the runbook service's pod through the RBAC `deploy render` emits.

A two-pod "cluster" of network namespaces (addresses from 198.18.0.0/15): the fake Kubernetes API server
(tests/support/kube, real REST paths and Status objects, RBAC evaluated from the rendered YAML) in one,
`servescope runbook-server` in the other, reaching it over a veth between them with its ServiceAccount's
token. The change steps are run as on-call runs them: POSTs to the service with the change token. A PDB
protects one of the node's two serving pods; a verb the rendered Role does not grant is refused by the
API server (403) and the step says so.

Rerun: .venv/bin/python -m pytest tests/runbook/test_cluster_actions.py -q -n 0 -s
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.runbook.cluster_peers import api_and_runbook_pods
from tests.runbook.fakes import step, write_runbook
from tests.runbook.kube_fakes import ACCOUNT, budget, deployment, node, pod, rendered

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ALERT = "ClusterAlert"
CHANGE_TOKEN = "change-token-of-the-on-call-0001"
STEPS = (
    step("cordon", "change", "cordon_node", 'node: "{{ labels.node }}"')
    + step("drain", "change", "drain_node", 'node: "{{ labels.node }}"\ntimeout: 6s')
    + step("scale", "change", "scale_deployment", "namespace: serving\ndeployment: vllm\nadd: 1")
    + step("scale-elsewhere", "change", "scale_deployment", "namespace: batch\ndeployment: trainer\nadd: 1")
)
OBJECTS = [
    node("gpu-node-07"),
    pod("vllm-a"),
    pod("vllm-b"),
    pod("router", labels={"app": "router"}),
    pod("gpu-exporter", daemonset=True, labels={"app": "exporter"}),
    budget("vllm-pdb", {"app": "vllm"}, maxUnavailable=1),
    deployment(2),
    deployment(1, "trainer", "batch"),
]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(the runbook service's URL as the host reaches it, the API server's request log)."""
    folder = tmp_path_factory.mktemp("cluster")
    write_runbook(folder / "runbooks", ALERT, mitigation=STEPS)
    rbac = rendered("serving")  # the Role is rendered for `serving` only, not `batch`
    runbooks = ("--runbooks", str(folder / "runbooks"))
    with api_and_runbook_pods(folder, rbac, OBJECTS, CHANGE_TOKEN, *runbooks) as pods:
        yield pods.runbooks, pods.requests


def _run(base: str, step_id: str, execute: bool = True) -> dict[str, Any]:
    answer = httpx.post(
        f"{base}/runbooks/{ALERT}/steps/{step_id}/run",
        json={"labels": {"node": "gpu-node-07"}, "execute": execute},
        headers={"Authorization": f"Bearer {CHANGE_TOKEN}"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _requests(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_cordon_drain_and_scale_act_through_the_rendered_rbac(service: tuple[str, Path]) -> None:
    base, log = service
    cordon = _run(base, "cordon")
    assert cordon["ok"] is True, cordon["output"]
    drain = _run(base, "drain")
    scale = _run(base, "scale")
    assert scale["ok"] is True and scale["data"]["target"] == 3, scale["output"]
    changes = [(r["method"], r["path"], r["status"]) for r in _requests(log) if r["method"] != "GET"]
    users = {r["user"] for r in _requests(log)}
    print("API calls that changed something:", *changes, sep="\n  ")
    assert users == {f"system:serviceaccount:{ACCOUNT[0]}:{ACCOUNT[1]}"}
    assert ("PATCH", "/api/v1/nodes/gpu-node-07", 200) in changes
    # One of the two vllm pods may go (maxUnavailable 1), the other is refused; the router goes; the
    # DaemonSet's pod is never evicted.
    evictions = {
        path.split("/")[-2]: status for method, path, status in changes if path.endswith("/eviction")
    }
    assert evictions["router"] == 201 and sorted([evictions["vllm-a"], evictions["vllm-b"]])[0] == 201
    assert 429 in (evictions["vllm-a"], evictions["vllm-b"]) and "gpu-exporter" not in evictions
    assert drain["ok"] is False and len(drain["data"]["not_evicted"]) == 1, drain["output"]
    assert "blocked by a PodDisruptionBudget" in drain["output"]
    assert ("PATCH", "/apis/apps/v1/namespaces/serving/deployments/vllm/scale", 200) in changes


def test_a_verb_the_role_lacks_is_refused_by_the_api_server(service: tuple[str, Path]) -> None:
    base, log = service
    refused = _run(base, "scale-elsewhere")
    assert refused["ok"] is False
    assert "HTTP 403 Forbidden" in refused["output"], refused["output"]
    assert 'cannot list resource "horizontalpodautoscalers"' in refused["output"]
    assert 'in the namespace "batch"' in refused["output"]
    forbidden = [r for r in _requests(log) if r["status"] == 403]
    assert forbidden and all("/namespaces/batch/" in r["path"] for r in forbidden)


def test_the_dry_run_prints_the_calls_the_execution_made(service: tuple[str, Path]) -> None:
    base, _ = service
    dry = _run(base, "cordon", execute=False)
    assert dry["dry_run"] is True
    assert dry["data"]["api_calls"] == [
        {
            "method": "PATCH",
            "path": "/api/v1/nodes/gpu-node-07",
            "content_type": "application/strategic-merge-patch+json",
            "body": {"spec": {"unschedulable": True}},
        }
    ]
