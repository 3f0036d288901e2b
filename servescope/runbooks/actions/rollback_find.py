"""What serves a canary: the ReplicaSets of its revision and of the stable one, and their owner.

The alert names a model's `revision` and `stable_revision`: the value of the first of the pod labels
(`--revision-pod-label`, the PodMonitor's order) the engine pod carries. A ReplicaSet carries its pods'
labels (the Deployment controller and Argo Rollouts copy the pod template's labels onto it, with their
template hash), so one list per label and namespace, `labelSelector=<label> in (<revision>,<stable>)`,
finds both revisions' ReplicaSets, and each one's controller (ownerReferences, `controller: true`) is
the Deployment or Argo Rollout that rolls it out. The namespaces searched are the step's `namespace`,
else the service's `--serving-namespace`s: those it holds a Role in.

Everything is read as the API server sends it (lightkube's generic resources keep every field): a
template written back must be the ReplicaSet's own, not what a client's models know of it.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lightkube import Client, operators
from lightkube.generic_resource import GenericNamespacedResource, create_api_info, create_namespaced_resource

from servescope.runbooks.actions.base import ActionError, RunContext
from servescope.runbooks.actions.kube import api

DEPLOYMENT_HASH = "pod-template-hash"  # the Deployment controller's label on its ReplicaSets and pods
ROLLOUT_HASH = "rollouts-pod-template-hash"  # Argo Rollouts' own
HASH_LABELS = {"Deployment": DEPLOYMENT_HASH, "Rollout": ROLLOUT_HASH}
CONTROLLERS = {("apps/v1", "Deployment"), ("argoproj.io/v1alpha1", "Rollout")}
REVISION_NUMBERS = ("deployment.kubernetes.io/revision", "rollout.argoproj.io/revision")


class RawReplicaSet(GenericNamespacedResource):
    """apps/v1 ReplicaSets as the API server sends them (not registered: the typed model stays)."""

    _api_info = create_api_info("apps", "v1", "ReplicaSet", "replicasets")


class RawDeployment(GenericNamespacedResource):
    """apps/v1 Deployments as the API server sends them."""

    _api_info = create_api_info("apps", "v1", "Deployment", "deployments")


Rollout = create_namespaced_resource("argoproj.io", "v1alpha1", "Rollout", "rollouts")


@dataclass(frozen=True)
class Owner:
    """The controller of a ReplicaSet: a Deployment or an Argo Rollout (or what else it names)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    def shown(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class ReplicaSetOf:
    """One ReplicaSet of a revision, as read."""

    obj: dict[str, Any]

    @property
    def meta(self) -> dict[str, Any]:
        return dict(self.obj.get("metadata") or {})

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.meta.get("labels") or {})

    @property
    def number(self) -> str:
        """Its revision number in its owner's history (the annotation both controllers keep)."""
        notes = self.meta.get("annotations") or {}
        return next((str(notes[key]) for key in REVISION_NUMBERS if key in notes), "?")

    @property
    def pods(self) -> int:
        return int((self.obj.get("status") or {}).get("replicas") or 0)

    @property
    def owner(self) -> Owner | None:
        for ref in self.meta.get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("controller"):
                return Owner(
                    str(ref.get("apiVersion")),
                    str(ref.get("kind")),
                    str(self.meta.get("namespace") or ""),
                    str(ref.get("name")),
                    str(ref.get("uid")),
                )
        return None

    def template(self, hash_label: str) -> dict[str, Any]:
        """Its pod template without the controller's hash label, as a workload's template is written."""
        return without_hash((self.obj.get("spec") or {}).get("template") or {}, hash_label)

    def shown(self) -> str:
        name = f"{self.meta.get('namespace')}/{self.meta.get('name')}"
        return f"ReplicaSet {name} (revision {self.number}, {self.pods} pod(s))"


def without_hash(template: dict[str, Any], hash_label: str) -> dict[str, Any]:
    """A pod template without the controller's hash label (kubectl's EqualIgnoreHash compares so)."""
    found = copy.deepcopy(template)
    labels = (found.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(hash_label, None)
    return found


@dataclass(frozen=True)
class Found:
    """Both revisions' ReplicaSets, found by the pod label `label`."""

    label: str
    canary: list[ReplicaSetOf]
    stable: list[ReplicaSetOf]


def _list(namespace: str, label: str, values: Sequence[str], client: Client) -> list[dict[str, Any]]:
    selected = client.list(RawReplicaSet, namespace=namespace, labels={label: operators.in_(values)})
    return [dict(found) for found in selected]


def namespaces(ctx: RunContext, namespace: str | None) -> tuple[str, ...]:
    searched = (namespace,) if namespace else ctx.serving_namespaces
    if not searched:
        raise ActionError(
            "no namespace to look for the model's workload in: give the step a `namespace`, or start the "
            "runbook service with --serving-namespace (deploy render passes its own). Nothing was changed."
        )
    return searched


def find(ctx: RunContext, where: tuple[str, ...], revision: str, stable: str) -> Found:
    """The ReplicaSets of both revisions, by the first revision pod label that finds the canary's."""
    for label in ctx.revision_pod_labels:
        found: list[ReplicaSetOf] = []
        for namespace in where:
            what = f"listing the ReplicaSets of namespace {namespace} labelled {label}"
            read = api(ctx, what, functools.partial(_list, namespace, label, (revision, stable)))
            found += [ReplicaSetOf(obj) for obj in read]
        canary = [rs for rs in found if rs.labels.get(label) == revision]
        if canary:
            return Found(label, canary, [rs for rs in found if rs.labels.get(label) == stable])
    raise ActionError(
        f"no ReplicaSet in namespace(s) {', '.join(where)} carries revision {revision} in any of the pod "
        f"labels {', '.join(ctx.revision_pod_labels)}: is the model served from another namespace "
        "(--serving-namespace, or the step's `namespace`), or its revision read from another pod label "
        "(--revision-pod-label)? Nothing was changed."
    )
