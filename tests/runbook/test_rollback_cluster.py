"""The shipped canary runbooks' `rollback` step, from the runbook service's pod through the rendered RBAC.

Two network-namespace pods (addresses from 198.18.0.0/15): the fake Kubernetes API server (real REST
paths and Status objects, RBAC from `deploy render --serving-namespace serving`) in one,
`servescope runbook-server --serving-namespace serving` in the other, with its ServiceAccount's token.
Two models in `serving` are canaries when their alerts fire: one a Deployment part way through a
rolling update, one an Argo Rollout at its 10 % step. On-call executes each alert's `rollback` step with
the change token; afterwards the Deployment's template is the stable ReplicaSet's and the Rollout is
aborted, every request was the runbook ServiceAccount's, and the audit trail holds both, chained.

Rerun: .venv/bin/python -m pytest tests/runbook/test_rollback_cluster.py -q -n 0 -s
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from servescope.runbooks.audit import verify
from tests.runbook.cluster_peers import Pods, api_and_runbook_pods
from tests.runbook.kube_fakes import ACCOUNT, TOKEN, rendered
from tests.runbook.rollback_objects import (
    LABELS,
    NAMESPACE,
    STABLE_TEMPLATE,
    WORKLOAD,
    argo_canary,
    deployment_canary,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
CHANGE_TOKEN = "change-token-of-the-on-call-0032"
QWEN = "vllm-qwen"
QWEN_LABELS = {
    **LABELS,
    "model_name": "Qwen/Qwen2.5-72B-Instruct",
    "revision": "5b6c7d8e9f",
    "stable_revision": "4a5b6c7d8e",
}


def _argo_qwen() -> list[dict[str, Any]]:
    """The Argo canary of rollback_objects, renamed: another model's Rollout in the same namespace."""
    objects = copy.deepcopy(argo_canary())
    hashes = {
        LABELS["revision"]: QWEN_LABELS["revision"],
        LABELS["stable_revision"]: QWEN_LABELS["stable_revision"],
    }
    text = json.dumps(objects).replace(WORKLOAD, QWEN)
    for old, new in hashes.items():
        text = text.replace(old, new)
    return list(json.loads(text))


@pytest.fixture(scope="module")
def pods(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pods]:
    """The runbook service started as `deploy render --serving-namespace serving` starts it."""
    folder = tmp_path_factory.mktemp("rollback-cluster")
    objects = [*deployment_canary(), *_argo_qwen()]
    serving = ("--serving-namespace", NAMESPACE)
    with api_and_runbook_pods(folder, rendered(NAMESPACE), objects, CHANGE_TOKEN, *serving) as found:
        yield found


def _rollback(base: str, alert: str, labels: dict[str, str]) -> dict[str, Any]:
    answer = httpx.post(
        f"{base}/runbooks/{alert}/steps/rollback/run",
        json={"labels": labels, "execute": True},
        headers={"Authorization": f"Bearer {CHANGE_TOKEN}"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _get(api: str, path: str) -> dict[str, Any]:
    answer = httpx.get(f"{api}{path}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_both_canaries_roll_back_from_the_pod_through_the_rendered_rbac(pods: Pods) -> None:
    base, log, audit, api = pods.runbooks, pods.requests, pods.audit, pods.api
    deployment = _rollback(base, "ServescopeCanaryWorseThanStable", LABELS)
    rollout = _rollback(base, "ServescopeCanarySloBurn", QWEN_LABELS)
    assert deployment["ok"] is True and rollout["ok"] is True, (deployment["output"], rollout["output"])
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    changes = [(r["method"], r["path"], r["status"]) for r in requests if r["method"] != "GET"]
    print("API calls that changed something:", *changes, sep="\n  ")
    assert {r["user"] for r in requests} == {f"system:serviceaccount:{ACCOUNT[0]}:{ACCOUNT[1]}"}
    assert changes == [
        ("PATCH", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{WORKLOAD}", 200),
        ("PATCH", f"/apis/argoproj.io/v1alpha1/namespaces/{NAMESPACE}/rollouts/{QWEN}/status", 200),
    ]
    template = _get(api, f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{WORKLOAD}")["spec"]["template"]
    assert template == STABLE_TEMPLATE
    assert _get(api, f"/apis/argoproj.io/v1alpha1/namespaces/{NAMESPACE}/rollouts/{QWEN}")["status"]["abort"]
    lines = audit.read_text().splitlines()
    outcomes = [(json.loads(line)["alert"], json.loads(line)["outcome"]) for line in lines]
    assert outcomes == [
        ("ServescopeCanaryWorseThanStable", "accepted"),
        ("ServescopeCanaryWorseThanStable", "executed"),
        ("ServescopeCanarySloBurn", "accepted"),
        ("ServescopeCanarySloBurn", "executed"),
    ]
    assert verify(lines)[0] == []
