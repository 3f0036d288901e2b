"""A cluster for the change actions: the fake Kubernetes API server (tests/support/kube), in this process,
with the RBAC that `servescope deploy render` emits, and the objects a test puts in it."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servescope.core.kube import close_clients
from servescope.deploy.options import DeployOptions
from servescope.deploy.render import stream
from servescope.runbooks.actions import RunContext
from tests.support.kube import FakeApi, Rbac, Store, serve

NAMESPACE = "servescope"  # where `deploy render` puts the runbook service's ServiceAccount
ACCOUNT = ("servescope", "servescope-runbooks")
TOKEN = "token-of-the-runbook-serviceaccount"
OTHER_TOKEN = "token-of-another-serviceaccount"


@functools.cache
def rendered(*serving: str) -> str:
    """The manifests `servescope deploy render --serving-namespace ...` prints."""
    return stream(DeployOptions(serving_namespaces=list(serving)))


@dataclass
class Cluster:
    api: FakeApi
    url: str
    token_file: Path

    def ctx(self, **values: Any) -> RunContext:
        return RunContext(kube_api_url=self.url, kube_token_file=str(self.token_file), **values)

    def changes(self) -> list[tuple[str, str]]:
        return [(r["method"], r["path"]) for r in self.api.changes()]


@contextmanager
def cluster(
    tmp_path: Path, *objects: dict[str, Any], serving: tuple[str, ...] = ("serving",)
) -> Iterator[Cluster]:
    """The fake API server on loopback with `objects`, RBAC rendered for `serving` namespaces."""
    store = Store()
    for obj in objects:
        store.add(obj)
    tokens = {TOKEN: ACCOUNT, OTHER_TOKEN: ("default", "someone-else")}
    api = FakeApi(store, Rbac.from_yaml(rendered(*serving)), tokens)
    server = serve(api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    token_file = tmp_path / "kube-token"
    token_file.write_text(TOKEN + "\n")
    try:
        yield Cluster(api, f"http://127.0.0.1:{server.server_address[1]}", token_file)
    finally:
        close_clients()  # the clients' kept-alive connections to this server
        server.shutdown()
        server.server_close()


def node(name: str, *, unschedulable: bool = False) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {"unschedulable": unschedulable} if unschedulable else {},
    }


def deployment(replicas: int, name: str = "vllm", namespace: str = "serving") -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas},
    }


def autoscaler(name: str, target: str, kind: str = "Deployment") -> dict[str, Any]:
    return {
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": "serving"},
        "spec": {
            "scaleTargetRef": {"kind": kind, "name": target, "apiVersion": "apps/v1"},
            "maxReplicas": 10,
        },
    }


def pod(
    name: str,
    node_name: str = "gpu-node-07",
    *,
    gpus: int = 1,
    emptydir: bool = False,
    daemonset: bool = False,
    mirror: bool = False,
    labels: dict[str, str] | None = None,
    namespace: str = "serving",
) -> dict[str, Any]:
    owner = {
        "kind": "DaemonSet" if daemonset else "ReplicaSet",
        "name": f"{name}-owner",
        "apiVersion": "apps/v1",
        "uid": "u",
    }
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": labels or {"app": "vllm"},
        "ownerReferences": [owner],
    }
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    volumes: list[dict[str, Any]] = [{"name": "cache", "emptyDir": {}}] if emptydir else []
    return {
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node_name,
            "volumes": volumes,
            "containers": [{"name": "engine", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }


def budget(name: str, selector: dict[str, str], **spec: Any) -> dict[str, Any]:
    """A PodDisruptionBudget: minAvailable= or maxUnavailable= (a number or "N%")."""
    return {
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "serving"},
        "spec": {"selector": {"matchLabels": selector}, **spec},
    }
