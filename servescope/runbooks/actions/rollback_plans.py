"""What `rollback` changes, decided from what it read: each change is the API call the dry run prints
and the function that sends exactly it.

- A Deployment: what `kubectl rollout undo --to-revision` does, through the API. Its pod template is
  replaced by the stable ReplicaSet's (without `pod-template-hash`), in one JSON patch; the Deployment
  controller then finds that ReplicaSet by the template's hash, scales it up and the canary's down. A
  paused Deployment is refused, as kubectl refuses it: it would not act on the change.
- An Argo Rollout: what `kubectl argo rollouts abort` does (`{"status": {"abort": true}}`, a merge patch
  of the `status` subresource): traffic and replicas go back to the stable ReplicaSet at once, and the
  Rollout stays aborted with the canary's template in its spec, which is what Git still says. With
  `undo: true`, then what `kubectl argo rollouts undo` does: the template becomes the stable
  ReplicaSet's (without `rollouts-pod-template-hash`), and the Rollout is healthy on the stable
  revision again.

A template patch starts with a JSON patch `test` of `metadata.generation` as read: if anyone changed the
workload's spec meanwhile the API server refuses the whole patch (422) and nothing changes. The
generation, unlike the resourceVersion, does not move when the controllers write the status.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lightkube import Client
from lightkube.types import PatchType

from servescope.runbooks.actions.base import ActionError, RunContext
from servescope.runbooks.actions.kube import JSON_PATCH, MERGE, ApiCall, api
from servescope.runbooks.actions.rollback_find import (
    DEPLOYMENT_HASH,
    ROLLOUT_HASH,
    Owner,
    RawDeployment,
    ReplicaSetOf,
    Rollout,
    without_hash,
)

ABORT = {"status": {"abort": True}}
GITOPS = (
    "a tool that syncs this workload from Git (Argo CD, Flux) puts the canary's template back unless the "
    "change is reverted in Git too"
)


@dataclass(frozen=True)
class Change:
    """One API call: as printed, the function that sends it, and what it did once sent."""

    call: ApiCall
    send: Callable[[Client], Any]
    done: str


@dataclass(frozen=True)
class Target:
    """The workload rolling the canary out, and its ReplicaSets of both revisions."""

    owner: Owner
    canary: list[ReplicaSetOf]
    stable: list[ReplicaSetOf]
    revision: str
    stable_revision: str

    def pair(self, canary: ReplicaSetOf, stable: ReplicaSetOf) -> str:
        return (
            f"canary: {canary.shown()}, revision {self.revision}; stable: {stable.shown()}, revision "
            f"{self.stable_revision}; both of {self.owner.shown()}"
        )


@dataclass
class Plan:
    notes: list[str]
    changes: list[Change] = field(default_factory=list)


def _read(ctx: RunContext, resource: Any, owner: Owner) -> dict[str, Any]:
    def get(client: Client) -> dict[str, Any]:
        return dict(client.get(resource, owner.name, namespace=owner.namespace))

    found = api(ctx, f"reading {owner.shown()}", get)
    if (found.get("metadata") or {}).get("uid") != owner.uid:
        raise ActionError(f"{owner.shown()} was replaced since its ReplicaSets were read: rerun")
    return found


def _patch_template(resource: Any, owner: Owner, operations: list[dict[str, Any]], client: Client) -> None:
    client.patch(resource, owner.name, operations, namespace=owner.namespace, patch_type=PatchType.JSON)


def _abort(owner: Owner, client: Client) -> None:
    client.patch(Rollout.Status, owner.name, ABORT, namespace=owner.namespace, patch_type=PatchType.MERGE)


def template_change(
    path: str, resource: Any, workload: dict[str, Any], stable: ReplicaSetOf, *, owner: Owner, hash_label: str
) -> Change:
    """The JSON patch that sets the workload's template to the stable ReplicaSet's, if its spec is still
    the generation read."""
    operations = []
    generation = (workload.get("metadata") or {}).get("generation")
    if generation is not None:
        operations.append({"op": "test", "path": "/metadata/generation", "value": generation})
    operations.append({"op": "replace", "path": "/spec/template", "value": stable.template(hash_label)})
    return Change(
        ApiCall("PATCH", path, operations, JSON_PATCH),
        functools.partial(_patch_template, resource, owner, operations),
        f"{owner.shown()}'s pod template is {stable.shown()}'s again",
    )


def _one_stable(target: Target) -> ReplicaSetOf:
    """The stable revision's ReplicaSet: the only one, else the only one with pods (a version label can
    name several templates)."""
    stable, owner, revision = target.stable, target.owner, target.stable_revision
    serving = [rs for rs in stable if rs.pods > 0]
    if len(stable) == 1 or len(serving) == 1:
        return stable[0] if len(stable) == 1 else serving[0]
    raise ActionError(
        f"the stable revision {revision} is {len(stable)} ReplicaSets of {owner.shown()} "
        f"({'; '.join(rs.shown() for rs in stable)}), {len(serving)} of them with pods: which template to go "
        "back to is not clear. Roll back by hand (kubectl rollout undo --to-revision N). Nothing was changed."
    )


def deployment_plan(ctx: RunContext, target: Target) -> Plan:
    """Set a Deployment's template back to the stable ReplicaSet's, once it is sure it runs the canary's."""
    owner = target.owner
    deployment = _read(ctx, RawDeployment, owner)
    spec = deployment.get("spec") or {}
    if spec.get("paused"):
        raise ActionError(
            f"{owner.shown()} is paused: its controller would not act on a rollback (kubectl refuses it "
            f"too). Resume it first (kubectl rollout resume deployment/{owner.name} -n {owner.namespace}), "
            "then run this step again. Nothing was changed."
        )
    current = without_hash(spec.get("template") or {}, DEPLOYMENT_HASH)
    back = _one_stable(target)
    if back.template(DEPLOYMENT_HASH) == current:
        return Plan([f"{owner.shown()} runs the stable revision's template already: nothing to do"])
    running = next((rs for rs in target.canary if rs.template(DEPLOYMENT_HASH) == current), None)
    if running is None:
        raise ActionError(
            f"{owner.shown()}'s pod template is neither revision {target.revision}'s "
            f"({'; '.join(rs.shown() for rs in target.canary)}) nor the stable's: it changed since the "
            "alert. Nothing was changed; look at `kubectl rollout history` first."
        )
    generation = (deployment.get("metadata") or {}).get("generation")
    path = f"/apis/apps/v1/namespaces/{owner.namespace}/deployments/{owner.name}"
    return Plan(
        [
            target.pair(running, back),
            f"{owner.shown()} runs the canary's pod template (generation {generation}): the patch sets it to "
            f"the stable ReplicaSet's, and the Deployment controller scales that one up and the canary's "
            "down, as `kubectl rollout undo` does; it is refused (422) if the spec changed meanwhile",
            GITOPS,
        ],
        [template_change(path, RawDeployment, deployment, back, owner=owner, hash_label=DEPLOYMENT_HASH)],
    )


def rollout_plan(ctx: RunContext, target: Target, undo: bool) -> Plan:
    """Abort an Argo Rollout (and with `undo`, set its template back), once its own status agrees that
    the canary is what it rolls out and the alert's stable revision is its stable ReplicaSet."""
    owner = target.owner
    rollout = _read(ctx, Rollout, owner)
    status = rollout.get("status") or {}
    rolling, stable_hash = status.get("currentPodHash"), status.get("stableRS")
    if rolling is not None and rolling == stable_hash:
        return Plan([f"{owner.shown()} is on its stable ReplicaSet ({stable_hash}) already: nothing to do"])
    running = next((rs for rs in target.canary if rs.labels.get(ROLLOUT_HASH) == rolling), None)
    back = next((rs for rs in target.stable if rs.labels.get(ROLLOUT_HASH) == stable_hash), None)
    if running is None or back is None:
        raise ActionError(
            f"{owner.shown()} rolls out {rolling} over its stable ReplicaSet {stable_hash}, not revision "
            f"{target.revision} over {target.stable_revision} as the alert says: it moved on since. "
            "Nothing was changed."
        )
    agrees = f"which agrees (status.currentPodHash {rolling}, status.stableRS {stable_hash})"
    notes, changes = _abort_and_undo(owner, rollout, back, undo)
    return Plan([f"{target.pair(running, back)}, {agrees}", *notes], changes)


def _abort_and_undo(
    owner: Owner, rollout: dict[str, Any], back: ReplicaSetOf, undo: bool
) -> tuple[list[str], list[Change]]:
    """The abort, unless the Rollout is aborted already, and the undo when asked: notes and changes."""
    base = f"/apis/argoproj.io/v1alpha1/namespaces/{owner.namespace}/rollouts/{owner.name}"
    notes: list[str] = []
    changes: list[Change] = []
    if (rollout.get("status") or {}).get("abort"):
        notes.append(f"{owner.shown()} is aborted already: traffic and replicas are back on the stable one")
    else:
        notes.append(
            "abort: traffic and replicas go back to the stable ReplicaSet now (kubectl argo rollouts abort); "
            "the Rollout stays Degraded with the canary's template until it is undone"
        )
        done = f"{owner.shown()} is aborted: the stable ReplicaSet takes the traffic back"
        call = ApiCall("PATCH", f"{base}/status", ABORT, MERGE)
        changes.append(Change(call, functools.partial(_abort, owner), done))
    if undo:
        if (rollout.get("spec") or {}).get("workloadRef"):
            raise ActionError(
                f"{owner.shown()} takes its pod template from a Deployment (spec.workloadRef): set that "
                "one's template back, or run this step without undo. Nothing was changed."
            )
        notes += ["undo: the Rollout's template becomes the stable ReplicaSet's (kubectl argo rollouts undo)"]
        notes.append(GITOPS)
        changes.append(template_change(base, Rollout, rollout, back, owner=owner, hash_label=ROLLOUT_HASH))
    return notes, changes
