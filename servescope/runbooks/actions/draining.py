"""`drain_node`: evict a node's pods, after reading what the eviction would lose and what would block it.

Read first (dry run and execution alike): the pods on the node that a drain evicts (not DaemonSet pods,
mirror pods or finished ones) and the PodDisruptionBudgets of their namespaces. emptyDir volumes often
hold a model cache: without `delete_emptydir_data: true` the step stops and names those pods (kubectl
drain would refuse them anyway). A budget that allows no disruption now stops the step too: the drain
would wait for its timeout. The GPUs the evicted pods request is the capacity needed on other nodes.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import StrictBool

from servescope.runbooks.actions.base import ActionError, RunContext, StepResult, action
from servescope.runbooks.actions.kube import field, get_json, items, kubectl_change, named, selector_matches
from servescope.runbooks.actions.params import K8sName, LiteralOnly, Params, Window, window_seconds

GPU_RESOURCE = "nvidia.com/gpu"


class DrainParams(Params):
    node: K8sName
    timeout: Window = "10m"
    delete_emptydir_data: Annotated[StrictBool, LiteralOnly()] = False


def _evicted(pod: dict[str, Any]) -> bool:
    owners = field(pod, "metadata", "ownerReferences") or []
    daemon = any(isinstance(o, dict) and o.get("kind") == "DaemonSet" for o in owners)
    mirror = "kubernetes.io/config.mirror" in (field(pod, "metadata", "annotations") or {})
    return not daemon and not mirror and field(pod, "status", "phase") not in ("Succeeded", "Failed")


def _uses_emptydir(pod: dict[str, Any]) -> bool:
    volumes = field(pod, "spec", "volumes") or []
    return any(isinstance(v, dict) and "emptyDir" in v for v in volumes)


def _gpus(pod: dict[str, Any]) -> int:
    total = 0
    for container in field(pod, "spec", "containers") or []:
        resources = field(container, "resources") or {}
        asked = field(resources, "limits", GPU_RESOURCE) or field(resources, "requests", GPU_RESOURCE)
        total += int(asked) if isinstance(asked, int | str) and str(asked).isdigit() else 0
    return total


def _budgets(ctx: RunContext, pods: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(budgets that block the drain now, budgets that make it wait for replacements), as sentences."""
    blocking: list[str] = []
    waiting: list[str] = []
    for namespace in sorted({field(p, "metadata", "namespace") or "default" for p in pods}):
        for budget in items(get_json(ctx, ["poddisruptionbudgets.policy", f"--namespace={namespace}"])):
            covered = [
                named(p)
                for p in pods
                if (field(p, "metadata", "namespace") or "default") == namespace
                and selector_matches(field(budget, "spec", "selector"), field(p, "metadata", "labels") or {})
            ]
            allowed = field(budget, "status", "disruptionsAllowed") or 0
            if not covered or allowed >= len(covered):
                continue
            text = (
                f"PodDisruptionBudget {named(budget)} allows {allowed} disruption(s) now and covers "
                f"{len(covered)} pod(s) here ({', '.join(covered)})"
            )
            (blocking if allowed == 0 else waiting).append(text)
    return blocking, waiting


def _checks(ctx: RunContext, params: DrainParams) -> list[str]:
    """What the drain would meet, as notes; ActionError when it must not start."""
    found = get_json(ctx, ["pods", "--all-namespaces", f"--field-selector=spec.nodeName={params.node}"])
    pods = [p for p in items(found) if _evicted(p)]
    with_emptydir = [named(p) for p in pods if _uses_emptydir(p)]
    if with_emptydir and not params.delete_emptydir_data:
        raise ActionError(
            f"pods on {params.node} keep emptyDir volumes (often a model cache): {', '.join(with_emptydir)}; "
            "a drain deletes that data and the replicas reload their weights elsewhere (tens of minutes "
            "for large models). Check the capacity elsewhere, then write delete_emptydir_data: true. "
            "Nothing was changed."
        )
    blocking, waiting = _budgets(ctx, pods)
    if blocking:
        raise ActionError(
            "; ".join(blocking) + ": the drain would wait until its timeout. Add replicas on other nodes "
            "first (scale_deployment) and wait for them to be ready. Nothing was changed."
        )
    gpus = sum(_gpus(p) for p in pods)
    notes = [
        f"{len(pods)} pod(s) to evict from {params.node}, requesting {gpus} GPU(s) that other nodes "
        "must have free for them to serve again"
    ]
    notes += [f"{text}: evictions wait for replacements to be ready" for text in waiting]
    if with_emptydir:
        notes.append(f"emptyDir data of {', '.join(with_emptydir)} is deleted (delete_emptydir_data: true)")
    return notes


@action("drain_node", "change", DrainParams)
def drain_node(params: DrainParams, ctx: RunContext) -> StepResult:
    """Evict the pods of a node (kubectl drain, keeping DaemonSets), after checking budgets and emptyDirs."""
    notes = _checks(ctx, params)
    seconds = window_seconds(params.timeout)
    argv = [ctx.kubectl, "drain", params.node, "--ignore-daemonsets"]
    argv += ["--delete-emptydir-data"] if params.delete_emptydir_data else []
    argv.append(f"--timeout={seconds}s")
    return kubectl_change(argv, f"Drain node {params.node}", ctx, seconds + ctx.timeout_seconds, notes)
