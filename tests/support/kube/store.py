"""The fake API server's objects, and the behaviour of the subresources servescope uses.

Objects are kept by (group, plural) then (namespace, name), so any resource the tests add (Argo
Rollouts, KEDA ScaledObjects) is served by the same generic paths. The behaviour that is not generic is
the API server's own: an eviction checks the PodDisruptionBudgets that select the pod (minAvailable /
maxUnavailable, integers or percentages, against the pods that are Running; an evicted pod is still
expected, as its controller has not replaced it yet) and answers 429 when one would be broken, else
deletes the pod; a budget's status is computed when it is read; a Deployment's
`scale` subresource reads and writes spec.replicas, and a write carrying another resourceVersion than
the object's is a 409 Conflict. Deployments, ReplicaSets and Argo Rollouts have a `status` subresource:
a patch of the object leaves its status alone and one of `/status` changes nothing else, and
`metadata.generation` counts the changes of everything but metadata and status (a status write does
not move it).
"""

from __future__ import annotations

import builtins
import copy
import itertools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.kube.errors import ApiStatusError
from tests.support.kube.patches import json_patch, merge_patch
from tests.support.kube.watching import EventLog

# (group, plural) -> kind and whether it is namespaced; anything else added is namespaced.
KINDS: dict[tuple[str, str], tuple[str, str, bool]] = {
    ("", "nodes"): ("Node", "v1", False),
    ("", "namespaces"): ("Namespace", "v1", False),
    ("", "pods"): ("Pod", "v1", True),
    ("policy", "poddisruptionbudgets"): ("PodDisruptionBudget", "policy/v1", True),
    ("apps", "deployments"): ("Deployment", "apps/v1", True),
    ("autoscaling", "horizontalpodautoscalers"): ("HorizontalPodAutoscaler", "autoscaling/v2", True),
    ("apps", "replicasets"): ("ReplicaSet", "apps/v1", True),
    ("argoproj.io", "rollouts"): ("Rollout", "argoproj.io/v1alpha1", True),
}
PLURALS = {kind: key for key, (kind, _, _) in KINDS.items()}
WITH_STATUS = {("apps", "deployments"), ("apps", "replicasets"), ("argoproj.io", "rollouts")}


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if (operator == "Exists") != present and operator in ("Exists", "DoesNotExist"):
            return False
    return True


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    """What `metadata.generation` counts the changes of: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _quantity(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = int(value[:-1]) * total / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value)


@dataclass
class Store:
    objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    log: EventLog = field(default_factory=EventLog)  # every change, by resourceVersion, for watches
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(100))
    # Pods evicted and not yet replaced: their controller still expects them (a budget counts them).
    evicted: builtins.list[tuple[str, dict[str, str]]] = field(default_factory=builtins.list)

    def add(self, obj: dict[str, Any], group: str | None = None, plural: str | None = None) -> dict[str, Any]:
        key = (group, plural) if group is not None and plural is not None else PLURALS[obj["kind"]]
        meta = obj.setdefault("metadata", {})
        meta.setdefault("resourceVersion", str(next(self._versions)))
        meta.setdefault("uid", f"uid-{meta['name']}")
        if key in WITH_STATUS:
            meta.setdefault("generation", 1)
        with self.lock:
            self.objects.setdefault(key, {})[(meta.get("namespace") or "", meta["name"])] = obj
        self._notify(key, "ADDED", obj)
        return obj

    def namespaced(self, key: tuple[str, str]) -> bool:
        return KINDS.get(key, ("", "", True))[2]

    def list(self, key: tuple[str, str], namespace: str | None) -> list[dict[str, Any]]:
        with self.lock:
            found = [
                copy.deepcopy(o)
                for (ns, _), o in sorted(self.objects.get(key, {}).items())
                if namespace is None or ns == namespace
            ]
        return [self._with_status(key, o) for o in found]

    def get(self, key: tuple[str, str], namespace: str | None, name: str) -> dict[str, Any]:
        with self.lock:
            found = self.objects.get(key, {}).get((namespace or "", name))
            if found is None:
                raise ApiStatusError(404, "NotFound", f'{key[1]} "{name}" not found')
            return self._with_status(key, copy.deepcopy(found))

    def patch(
        self, key: tuple[str, str], namespace: str | None, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """A merge (or strategic merge) patch of the object; a resourceVersion in it is a precondition."""
        return self._update(key, namespace, name, lambda current: merge_patch(current, body))

    def json_patch(
        self, key: tuple[str, str], namespace: str | None, name: str, operations: Any
    ) -> dict[str, Any]:
        """An RFC 6902 patch of the object: all of it, or nothing and a 422."""
        return self._update(key, namespace, name, lambda current: json_patch(current, operations))

    def patch_status(
        self, key: tuple[str, str], namespace: str | None, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """A merge patch of the `status` subresource: only the status changes."""

        def change(current: dict[str, Any]) -> dict[str, Any]:
            status = merge_patch(current.get("status") or {}, (body or {}).get("status") or {})
            return {**current, "status": status}

        return self._update(key, namespace, name, change, of_status=True)

    def _update(
        self,
        key: tuple[str, str],
        namespace: str | None,
        name: str,
        change: Callable[[dict[str, Any]], dict[str, Any]],
        of_status: bool = False,
    ) -> dict[str, Any]:
        with self.lock:
            current = self.get(key, namespace, name)
            updated = change(copy.deepcopy(current))
            meta = updated.setdefault("metadata", {})
            if meta.get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise ApiStatusError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {key[1]} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                )
            if key in WITH_STATUS and not of_status:  # the object's endpoint leaves its status alone
                updated["status"] = current.get("status")
                if updated["status"] is None:
                    del updated["status"]
            if key in WITH_STATUS and _spec(updated) != _spec(current):
                meta["generation"] = int(current["metadata"].get("generation") or 0) + 1
            meta["resourceVersion"] = str(next(self._versions))
            self.objects[key][(namespace or "", name)] = updated
        self._notify(key, "MODIFIED", updated)
        return updated

    def delete(self, key: tuple[str, str], namespace: str | None, name: str) -> None:
        with self.lock:
            gone = self.objects.get(key, {}).pop((namespace or "", name), None)
            if gone is not None:  # the deletion has a resourceVersion of its own
                gone["metadata"]["resourceVersion"] = str(next(self._versions))
        if gone is not None:
            self._notify(key, "DELETED", gone)

    def compact(self) -> None:
        """As etcd's compaction: every resourceVersion handed out so far is too old to watch from."""
        with self.lock:
            self.log.compact(next(self._versions))

    def version(self) -> int:
        """The resourceVersion of the latest change (what a list answers with)."""
        with self.lock:
            return self.log.current

    def _notify(self, key: tuple[str, str], kind: str, obj: dict[str, Any]) -> None:
        self.log.record(key, kind, copy.deepcopy(obj))

    # --- the API server's own behaviour ------------------------------------------------------------
    def _with_status(self, key: tuple[str, str], obj: dict[str, Any]) -> dict[str, Any]:
        if key == ("policy", "poddisruptionbudgets"):
            obj["status"] = self._budget_status(obj)
        return obj

    def _covered(self, budget: dict[str, Any]) -> builtins.list[dict[str, Any]]:
        namespace = budget["metadata"].get("namespace", "")
        selector = (budget.get("spec") or {}).get("selector")
        return [
            pod
            for (ns, _), pod in self.objects.get(("", "pods"), {}).items()
            if ns == namespace and selector_matches(selector, (pod.get("metadata") or {}).get("labels") or {})
        ]

    def _budget_status(self, budget: dict[str, Any]) -> dict[str, Any]:
        pods = self._covered(budget)
        healthy = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")
        spec = budget.get("spec") or {}
        namespace, selector = budget["metadata"].get("namespace", ""), spec.get("selector")
        gone = sum(1 for ns, labels in self.evicted if ns == namespace and selector_matches(selector, labels))
        expected = len(pods) + gone
        if "minAvailable" in spec:
            desired = _quantity(spec["minAvailable"], expected, round_up=True)
        else:
            desired = expected - _quantity(spec.get("maxUnavailable", 0), expected, round_up=True)
        allowed = max(0, healthy - desired)
        return {
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "disruptionsAllowed": allowed,
        }

    def evict(self, namespace: str, name: str) -> None:
        """Evict a pod: 429 when a budget selecting it allows no disruption, else the pod is deleted."""
        with self.lock:
            pod = self.get(("", "pods"), namespace, name)
            labels = pod["metadata"].get("labels") or {}
            for budget in self.objects.get(("policy", "poddisruptionbudgets"), {}).values():
                if budget["metadata"].get("namespace") != namespace:
                    continue
                if not selector_matches((budget.get("spec") or {}).get("selector"), labels):
                    continue
                if self._budget_status(budget)["disruptionsAllowed"] < 1:
                    raise ApiStatusError(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                    )
            self.delete(("", "pods"), namespace, name)
            self.evicted.append((namespace, labels))

    def scale(self, namespace: str, name: str) -> dict[str, Any]:
        deployment = self.get(("apps", "deployments"), namespace, name)
        meta = deployment["metadata"]
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "resourceVersion": meta["resourceVersion"],
                "uid": meta["uid"],
            },
            "spec": {"replicas": (deployment.get("spec") or {}).get("replicas", 1)},
            "status": {"replicas": (deployment.get("spec") or {}).get("replicas", 1)},
        }

    def patch_scale(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        replicas = (body.get("spec") or {}).get("replicas")
        patch: dict[str, Any] = {"metadata": body.get("metadata") or {}}
        if replicas is not None:
            patch["spec"] = {"replicas": replicas}
        self.patch(("apps", "deployments"), namespace, name, patch)
        return self.scale(namespace, name)
