"""The objects of a canary in the fake API server, as the Deployment controller and Argo Rollouts leave them.

A model served by a workload in `serving`: the stable revision (engine v0.6.3) and a canary (v0.6.4 with
a larger batch). Each revision is a ReplicaSet carrying the pod template with the controller's hash
label (`pod-template-hash`, or Argo's `rollouts-pod-template-hash`) on its template, its labels and its
selector, its revision number annotated, and a controller ownerReference to its workload, which is what
both controllers do. The hashes are the alert's `revision` and `stable_revision`.
"""

from __future__ import annotations

import copy
from typing import Any

from servescope.runbooks.actions import ACTIONS, StepResult
from tests.runbook.kube_fakes import Cluster

NAMESPACE = "serving"
WORKLOAD = "vllm-deepseek"
MODEL = "deepseek-ai/DeepSeek-V3"
CANARY, STABLE = "6d4cf56db9", "7f8b9c0d1e"
DEPLOYMENT_HASH, ROLLOUT_HASH = "pod-template-hash", "rollouts-pod-template-hash"
LABELS = {
    "model_name": MODEL,
    "revision": CANARY,
    "stable_revision": STABLE,
    "sli": "ttft_p99_ratio",
    "alertname": "ServescopeCanaryWorseThanStable",
    "severity": "warning",
}


def pod_template(version: str, max_num_seqs: int, app: str = WORKLOAD) -> dict[str, Any]:
    """An engine pod's template; `futureField` stands for a field newer than any client's models: the
    rollback must write the stable template back whole, not what a typed client understood of it."""
    return {
        "metadata": {
            "labels": {"app": app, "app.kubernetes.io/version": version},
            "annotations": {"kubectl.kubernetes.io/default-container": "engine"},
        },
        "spec": {
            "containers": [
                {
                    "name": "engine",
                    "image": f"vllm/vllm-openai:{version}",
                    "args": ["--model", MODEL, "--max-num-seqs", str(max_num_seqs)],
                    "resources": {"limits": {"nvidia.com/gpu": "8"}},
                }
            ],
            "futureField": {"kept": True},
        },
    }


STABLE_TEMPLATE = pod_template("v0.6.3", 256)
CANARY_TEMPLATE = pod_template("v0.6.4", 512)


def hashed(template: dict[str, Any], label: str, value: str) -> dict[str, Any]:
    found = copy.deepcopy(template)
    found["metadata"]["labels"][label] = value
    return found


def deployment(template: dict[str, Any], *, name: str = WORKLOAD, paused: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": 4,
        "selector": {"matchLabels": {"app": template["metadata"]["labels"]["app"]}},
        "template": copy.deepcopy(template),
    }
    if paused:
        spec["paused"] = True
    meta = {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}", "generation": 7}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}


def rollout(current: str, stable: str, *, abort: bool = False, name: str = WORKLOAD) -> dict[str, Any]:
    """An Argo Rollout rolling `current` out over `stable` (its template is the canary's)."""
    status: dict[str, Any] = {"currentPodHash": current, "stableRS": stable, "phase": "Paused"}
    if abort:
        status |= {"abort": True, "phase": "Degraded"}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}", "generation": 3},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": WORKLOAD}},
            "template": copy.deepcopy(CANARY_TEMPLATE),
            "strategy": {"canary": {"steps": [{"setWeight": 10}, {"pause": {}}]}},
        },
        "status": status,
    }


def replica_set(
    template: dict[str, Any], value: str, number: int, pods: int, *, owner: str = WORKLOAD, argo: bool = False
) -> dict[str, Any]:
    """One revision's ReplicaSet, owned by the Deployment `owner` (or by the Argo Rollout)."""
    label = ROLLOUT_HASH if argo else DEPLOYMENT_HASH
    annotation = "rollout.argoproj.io/revision" if argo else "deployment.kubernetes.io/revision"
    api_version, kind = ("argoproj.io/v1alpha1", "Rollout") if argo else ("apps/v1", "Deployment")
    with_hash = hashed(template, label, value)
    reference = {"apiVersion": api_version, "kind": kind, "name": owner, "uid": f"uid-{owner}"}
    meta = {
        "name": f"{owner}-{value}",
        "namespace": NAMESPACE,
        "labels": dict(with_hash["metadata"]["labels"]),
        "annotations": {annotation: str(number)},
        "ownerReferences": [{**reference, "controller": True, "blockOwnerDeletion": True}],
    }
    selector = {"matchLabels": {"app": template["metadata"]["labels"]["app"], label: value}}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": meta,
        "spec": {"replicas": pods, "selector": selector, "template": with_hash},
        "status": {"replicas": pods},
    }


def deployment_canary(**deployment_options: Any) -> list[dict[str, Any]]:
    """A Deployment part way through its rolling update: 3 stable pods, 1 canary pod."""
    return [
        deployment(CANARY_TEMPLATE, **deployment_options),
        replica_set(STABLE_TEMPLATE, STABLE, 1, 3),
        replica_set(CANARY_TEMPLATE, CANARY, 2, 1),
    ]


def argo_canary(**rollout_options: Any) -> list[dict[str, Any]]:
    """An Argo Rollout at its 10 % step: the stable ReplicaSet serves, the canary's has one pod."""
    return [
        rollout(CANARY, STABLE, **rollout_options),
        replica_set(STABLE_TEMPLATE, STABLE, 1, 4, argo=True),
        replica_set(CANARY_TEMPLATE, CANARY, 2, 1, argo=True),
    ]


def step_params(**extra: Any) -> dict[str, Any]:
    return {"model_name": MODEL, "revision": CANARY, "stable_revision": STABLE, **extra}


def run_rollback(
    kube: Cluster, execute: bool, namespaces: tuple[str, ...] = (NAMESPACE,), **extra: Any
) -> StepResult:
    """The step with the alert's parameters (and `extra`), looking in `namespaces`."""
    action = ACTIONS["rollback"]
    ctx = kube.ctx(execute=execute, timeout_seconds=5, serving_namespaces=namespaces)
    return action.run(action.params.model_validate(step_params(**extra)), ctx)


def sent(kube: Cluster) -> list[dict[str, Any]]:
    """The changing requests the API server received, in the dry run's `api_calls` form."""
    return [
        {"method": r["method"], "path": r["path"], "content_type": r["content_type"], "body": r["body"]}
        for r in kube.api.changes()
    ]
