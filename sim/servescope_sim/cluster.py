"""The Kubernetes side of a simulated node: its engines are the pods of one Deployment, and a rollout
replaces a pod by one of a new revision.

What the real exporter and runbook service read of a cluster, through the interfaces they read it by:
the kubelet's pod-resources socket (kubelet.py: which pod holds which GPU) and an API server (kube_api.py:
the node's pods with their labels, listed and watched; the Deployment and its ReplicaSets, which a
`rollback` step reads). Engine i is pod `deepseek-v3-<hash>-<id>` in namespace `serving`, on the GPUs the
engine runs on, labelled with its revision's `pod-template-hash` as the Deployment controller labels it.
A scenario says which revision each engine runs (Scenario.revisions); when one changes, its pod is
deleted and a pod of the new revision takes its GPUs, as a rollout step does, with a new
resourceVersion for each change, so that a watch sees them in order.
"""

from __future__ import annotations

import copy
import hashlib
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

from servescope_sim.kubelet import container, pod

NAMESPACE = "serving"
DEPLOYMENT = "deepseek-v3"
HASH_LABEL = "pod-template-hash"
GPU_RESOURCE = "nvidia.com/gpu"
# Each revision's pod template: what `rollback` compares the Deployment's against, and puts back.
IMAGES = {"6d4cf56db9": "vllm/vllm-openai:v0.11.0", "84b5c7f9d6": "vllm/vllm-openai:v0.11.1"}
STABLE_REVISION, CANARY_REVISION = IMAGES


def template(revision: str) -> dict[str, Any]:
    """The pod template of a revision, without the controller's hash label (as the Deployment has it)."""
    return {
        "metadata": {"labels": {"app.kubernetes.io/name": DEPLOYMENT}},
        "spec": {
            "containers": [
                {
                    "name": "vllm",
                    "image": IMAGES.get(revision, f"vllm/vllm-openai:{revision}"),
                    "args": ["--model", "deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "2"],
                }
            ]
        },
    }


def labelled(revision: str) -> dict[str, Any]:
    """The template as the controller stamps it on its ReplicaSet and pods: with the hash label."""
    found = template(revision)
    found["metadata"]["labels"][HASH_LABEL] = revision
    return found


class EnginePod(NamedTuple):
    engine: int
    revision: str
    name: str


class Change(NamedTuple):
    """One watch event of the pods' history, at the resourceVersion it made."""

    version: int
    kind: str  # ADDED or DELETED
    obj: dict[str, Any]


class ClusterState:
    """The pods of the node (one per engine), every change numbered, and the Deployment's view of them."""

    def __init__(self, node: str, gpu_uuids: Sequence[Sequence[str]]) -> None:
        self.node, self.gpu_uuids = node, [list(group) for group in gpu_uuids]
        self.changed = threading.Condition()
        self.version = 100
        self.changes: list[Change] = []  # small: one per pod replaced
        self.pods: dict[int, EnginePod] = {}
        self.revisions_seen: list[str] = []  # the Deployment's history, oldest first

    def set_revisions(self, revisions: Sequence[str]) -> bool:
        """Each engine's pod runs its revision from now on; True when a pod was replaced."""
        replaced = False
        with self.changed:
            for engine, revision in enumerate(revisions[: len(self.gpu_uuids)]):
                current = self.pods.get(engine)
                if current is not None and current.revision == revision:
                    continue
                if current is not None:
                    self._record("DELETED", current)
                if revision not in self.revisions_seen:
                    self.revisions_seen.append(revision)
                self.pods[engine] = EnginePod(engine, revision, _pod_name(revision, engine))
                self._record("ADDED", self.pods[engine])
                replaced = True
            if replaced:
                self.changed.notify_all()
        return replaced

    def _record(self, kind: str, engine_pod: EnginePod) -> None:
        self.version += 1
        self.changes.append(Change(self.version, kind, self.pod_object(engine_pod, self.version)))

    def pod_object(self, engine_pod: EnginePod, version: int) -> dict[str, Any]:
        labels = {
            **labelled(engine_pod.revision)["metadata"]["labels"],
            "servescope_sim/engine": str(engine_pod.engine),
        }
        return {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "name": engine_pod.name,
                "namespace": NAMESPACE,
                "labels": labels,
                "resourceVersion": str(version),
                "ownerReferences": [_owner("ReplicaSet", f"{DEPLOYMENT}-{engine_pod.revision}")],
            },
            "spec": {"nodeName": self.node, **copy.deepcopy(labelled(engine_pod.revision)["spec"])},
            "status": {"phase": "Running"},
        }

    def listing(self) -> tuple[list[dict[str, Any]], int]:
        with self.changed:
            return [self.pod_object(p, self.version) for p in self.pods.values()], self.version

    def kubelet_pods(self) -> list[Any]:
        with self.changed:
            return [
                pod(NAMESPACE, p.name, container("vllm", (GPU_RESOURCE, self.gpu_uuids[p.engine])))
                for p in self.pods.values()
                if self.gpu_uuids[p.engine]
            ]

    # --- the Deployment and its ReplicaSets, as `rollback` reads them ------------------------------
    def replicasets(self) -> list[dict[str, Any]]:
        with self.changed:
            serving = [p.revision for p in self.pods.values()]
            history = list(self.revisions_seen)
        return [
            {
                "kind": "ReplicaSet",
                "apiVersion": "apps/v1",
                "metadata": {
                    "name": f"{DEPLOYMENT}-{revision}",
                    "namespace": NAMESPACE,
                    "uid": _uid(f"replicaset/{revision}"),
                    "labels": dict(labelled(revision)["metadata"]["labels"]),
                    "annotations": {"deployment.kubernetes.io/revision": str(number)},
                    "ownerReferences": [_owner("Deployment", DEPLOYMENT)],
                },
                "spec": {"replicas": serving.count(revision), "template": labelled(revision)},
                "status": {"replicas": serving.count(revision)},
            }
            for number, revision in enumerate(history, start=1)
        ]

    def deployment(self) -> dict[str, Any]:
        with self.changed:
            history, replicas = list(self.revisions_seen), len(self.pods)
        latest = history[-1] if history else STABLE_REVISION
        return {
            "kind": "Deployment",
            "apiVersion": "apps/v1",
            "metadata": {
                "name": DEPLOYMENT,
                "namespace": NAMESPACE,
                "uid": _uid(f"deployment/{DEPLOYMENT}"),
                "generation": len(history),
                "annotations": {"deployment.kubernetes.io/revision": str(len(history))},
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app.kubernetes.io/name": DEPLOYMENT}},
                "template": template(latest),
            },
        }


def _uid(what: str) -> str:
    digest = hashlib.sha256(what.encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _owner(kind: str, name: str) -> dict[str, Any]:
    what = f"deployment/{name}" if kind == "Deployment" else f"replicaset/{name.rsplit('-', 1)[-1]}"
    api = "apps/v1"
    return {"apiVersion": api, "kind": kind, "name": name, "uid": _uid(what), "controller": True}


def _pod_name(revision: str, engine: int) -> str:
    """`<deployment>-<hash>-<5 characters>`, the same for the same engine and revision."""
    suffix = hashlib.sha256(f"{revision}/{engine}".encode()).hexdigest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return f"{DEPLOYMENT}-{revision}-" + "".join(
        alphabet[int(suffix[i : i + 2], 16) % 27] for i in range(0, 10, 2)
    )
