"""`drain_node`: cordon a node and evict its pods through the Eviction API, after reading what it would
lose and what would refuse.

Read first (dry run and execution alike): the pods on the node (`GET /api/v1/pods?fieldSelector=
spec.nodeName=<node>`) and the PodDisruptionBudgets of their namespaces. DaemonSet pods (their
controller would put them straight back) and mirror pods (the kubelet's static pods, which the API
cannot evict) are never evicted, nor finished ones. emptyDir volumes often hold a model cache: without
`delete_emptydir_data: true` the step stops and names those pods. Then the node is cordoned and each pod
evicted (`POST .../pods/<pod>/eviction`): the API server enforces the budgets, answering 429 for a pod
whose eviction would break one; those are tried again every few seconds until `timeout`, then reported
as not evicted, with the reason the API gave.
"""

from __future__ import annotations

import functools
import time
from typing import Annotated, Any

from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget
from lightkube.types import PatchType
from pydantic import StrictBool

from servescope.runbooks.actions.base import ActionError, RunContext, StepResult, action
from servescope.runbooks.actions.changes import CORDON, cordon_call
from servescope.runbooks.actions.kube import (
    ApiCall,
    ApiRefusedError,
    api,
    dry_run,
    executed,
    named,
    selector_matches,
)
from servescope.runbooks.actions.params import K8sName, LiteralOnly, Params, Window, window_seconds

GPU_RESOURCE = "nvidia.com/gpu"
RETRY_SECONDS = 5.0
MIRROR = "kubernetes.io/config.mirror"


class DrainParams(Params):
    node: K8sName
    timeout: Window = "10m"
    delete_emptydir_data: Annotated[StrictBool, LiteralOnly()] = False


def _skipped(pod: Pod) -> str | None:
    """Why a pod of the node is not evicted, None when it is."""
    meta = pod.metadata or ObjectMeta()
    if any(owner.kind == "DaemonSet" for owner in meta.ownerReferences or []):
        return "DaemonSet pod"
    if MIRROR in (meta.annotations or {}):
        return "mirror (static) pod"
    if pod.status is not None and pod.status.phase in ("Succeeded", "Failed"):
        return "finished"
    return None


def _name(pod: Pod) -> str:
    meta = pod.metadata or ObjectMeta()
    return named(meta.namespace, meta.name)


def _uses_emptydir(pod: Pod) -> bool:
    return any(volume.emptyDir is not None for volume in (pod.spec.volumes if pod.spec else None) or [])


def _gpus(pod: Pod) -> int:
    total = 0
    for container in pod.spec.containers if pod.spec else []:
        resources = container.resources
        asked: Any = None
        if resources is not None:
            asked = (resources.limits or {}).get(GPU_RESOURCE) or (resources.requests or {}).get(GPU_RESOURCE)
        total += int(asked) if str(asked).isdigit() else 0
    return total


def _budget_notes(ctx: RunContext, pods: list[Pod]) -> list[str]:
    """A sentence per budget covering pods here that allows fewer disruptions than it covers pods."""
    notes: list[str] = []
    namespaces = sorted({(p.metadata.namespace if p.metadata else None) or "default" for p in pods})
    for namespace in namespaces:
        budgets = api(
            ctx,
            f"listing the PodDisruptionBudgets of namespace {namespace}",
            functools.partial(_budgets_in, namespace),
        )
        for budget in budgets:
            selector = budget.spec.selector.to_dict() if budget.spec and budget.spec.selector else None
            covered = [
                _name(p)
                for p in pods
                if p.metadata is not None
                and (p.metadata.namespace or "default") == namespace
                and selector_matches(selector, p.metadata.labels or {})
            ]
            allowed = (budget.status.disruptionsAllowed if budget.status else 0) or 0
            if covered and allowed < len(covered):
                meta = budget.metadata or ObjectMeta()
                notes.append(
                    f"PodDisruptionBudget {named(meta.namespace, meta.name)} allows {allowed} disruption(s) "
                    f"now and covers {len(covered)} pod(s) here ({', '.join(covered)}): the API server "
                    "refuses the evictions past that until replacements are ready"
                )
    return notes


def _budgets_in(namespace: str, client: Client) -> list[PodDisruptionBudget]:
    return list(client.list(PodDisruptionBudget, namespace=namespace))


def _create_eviction(eviction: Any, client: Client) -> None:
    meta = eviction.metadata
    client.create(eviction, meta.name, namespace=meta.namespace)


def eviction_call(pod: Pod) -> ApiCall:
    meta = pod.metadata or ObjectMeta()
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta.name, "namespace": meta.namespace},
    }
    return ApiCall(
        "POST", f"/api/v1/namespaces/{meta.namespace}/pods/{meta.name}/eviction", body, "application/json"
    )


def _read(ctx: RunContext, params: DrainParams) -> tuple[list[Pod], list[str]]:
    """The pods to evict, and notes on what the drain meets; ActionError when it must not start."""
    found = api(
        ctx,
        f"listing the pods of node {params.node}",
        lambda c: list(c.list(Pod, namespace="*", fields={"spec.nodeName": params.node})),
    )
    skipped = [f"{_name(p)} ({why})" for p in found if (why := _skipped(p)) is not None]
    pods = [p for p in found if _skipped(p) is None]
    with_emptydir = [_name(p) for p in pods if _uses_emptydir(p)]
    if with_emptydir and not params.delete_emptydir_data:
        raise ActionError(
            f"pods on {params.node} keep emptyDir volumes (often a model cache): {', '.join(with_emptydir)}; "
            "a drain deletes that data and the replicas reload their weights elsewhere (tens of minutes "
            "for large models). Check the capacity elsewhere, then write delete_emptydir_data: true. "
            "Nothing was changed."
        )
    notes = [
        f"{len(pods)} pod(s) to evict from {params.node}, requesting {sum(_gpus(p) for p in pods)} GPU(s) "
        "that other nodes must have free for them to serve again"
    ]
    notes += [f"not evicted: {', '.join(skipped)}"] if skipped else []
    notes += _budget_notes(ctx, pods)
    if with_emptydir:
        notes.append(f"emptyDir data of {', '.join(with_emptydir)} is deleted (delete_emptydir_data: true)")
    return pods, notes


def _evict(ctx: RunContext, pods: list[Pod], deadline: float) -> tuple[list[str], dict[str, str]]:
    """(evicted, {pod: why not}) after trying the refused ones again until `deadline`."""
    evicted: list[str] = []
    refused: dict[str, str] = {}
    pending = list(pods)
    while pending:
        retry: list[Pod] = []
        for pod in pending:
            meta = pod.metadata or ObjectMeta()
            eviction = Pod.Eviction(metadata=ObjectMeta(name=meta.name, namespace=meta.namespace))
            try:
                api(
                    ctx,
                    f"evicting {_name(pod)}",
                    functools.partial(_create_eviction, eviction),
                )
            except ApiRefusedError as exc:
                if exc.code == 404:
                    evicted.append(f"{_name(pod)} (gone already)")
                    continue
                blocked = exc.code == 429
                refused[_name(pod)] = (
                    f"blocked by a PodDisruptionBudget ({exc.status})" if blocked else str(exc)
                )
                retry += [pod] if blocked else []
                continue
            refused.pop(_name(pod), None)
            evicted.append(_name(pod))
        if not retry or time.monotonic() + RETRY_SECONDS > deadline:
            break
        time.sleep(RETRY_SECONDS)
        pending = retry
    return evicted, refused


@action("drain_node", "change", DrainParams)
def drain_node(params: DrainParams, ctx: RunContext) -> StepResult:
    """Cordon a node and evict its pods through the Eviction API (budgets honoured, DaemonSet and mirror
    pods kept), after checking emptyDirs; reports what it could not evict."""
    title = f"Drain node {params.node}"
    pods, notes = _read(ctx, params)
    calls = [cordon_call(params.node), *(eviction_call(p) for p in pods)]
    if not ctx.execute:
        return dry_run(title, calls, notes)
    api(
        ctx,
        f"cordoning node {params.node}",
        lambda c: c.patch(Node, params.node, CORDON, patch_type=PatchType.STRATEGIC),
    )
    evicted, refused = _evict(ctx, pods, time.monotonic() + window_seconds(params.timeout))
    lines = [
        *notes,
        f"node {params.node} cordoned; evicted {len(evicted)} pod(s): {', '.join(evicted) or 'none'}",
    ]
    lines += [f"NOT evicted {pod}: {why}" for pod, why in refused.items()]
    return executed(title, calls, lines, ok=not refused, evicted=evicted, not_evicted=refused)
