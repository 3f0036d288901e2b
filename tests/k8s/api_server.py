"""The fake Kubernetes API server (tests/support/kube) with the RBAC `servescope deploy render` emits, and
pods on two nodes, for the exporter's list and watch of its node's pods (exporter/k8s/pod_labels.py)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx2

from servescope.core.kube import KubeAccess, http_client
from servescope.deploy.options import DeployOptions
from servescope.deploy.render import stream
from tests.support.kube import FakeApi, Rbac, Store, serve

EXPORTER_ACCOUNT = ("servescope", "servescope")  # where `deploy render` puts the exporter's ServiceAccount
EXPORTER_TOKEN = "token-of-the-exporter-serviceaccount"
NOBODY_TOKEN = "token-of-a-serviceaccount-without-rbac"
NODE = "gpu-node-a"


@functools.cache
def rendered(**options: Any) -> str:
    return stream(DeployOptions(**options))


def pod(namespace: str, name: str, node: str = NODE, **labels: str) -> dict[str, Any]:
    """A pod as the API server keeps it: metadata, and a spec that the exporter must never be sent."""
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "vllm", "env": [{"name": "HF_TOKEN", "value": "hf_secret"}]}],
        },
        "status": {"phase": "Running"},
    }


@dataclass
class ApiServer:
    api: FakeApi
    url: str
    token_file: Path

    @property
    def store(self) -> Store:
        return self.api.store

    def connect(self, timeout: float = 5.0) -> httpx2.Client:
        return http_client(
            KubeAccess(api_url=self.url, token_file=str(self.token_file)), httpx2.Timeout(timeout)
        )

    def lists(self) -> list[dict[str, Any]]:
        """The lists of pods answered so far, oldest first."""
        with self.api.lock:
            found = [r for r in self.api.requests if r["path"] == "/api/v1/pods"]
        return [r for r in found if "watch=true" not in r["query"]]

    def watches(self) -> list[dict[str, str]]:
        """The query of every watch started so far (a watch is recorded as a request once it ends)."""
        with self.store.log.lock:
            started = list(self.store.log.started)
        return [{k: v[0] for k, v in parse_qs(s.query).items()} for s in started]

    def relabel(self, namespace: str, name: str, **labels: str) -> None:
        self.store.patch(("", "pods"), namespace, name, {"metadata": {"labels": labels}})


@contextmanager
def api_server(
    tmp_path: Path, *pods: dict[str, Any], token: str = EXPORTER_TOKEN, **options: Any
) -> Iterator[ApiServer]:
    """The fake API server on loopback holding `pods`, RBAC rendered with `options`; the exporter's
    credentials (or `token`) in a token file."""
    store = Store()
    for found in pods:
        store.add(found)
    tokens = {EXPORTER_TOKEN: EXPORTER_ACCOUNT, NOBODY_TOKEN: ("default", "nobody")}
    api = FakeApi(store, Rbac.from_yaml(rendered(**options)), tokens)
    server = serve(api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    token_file = tmp_path / "kube-token"
    token_file.write_text(token + "\n")
    try:
        yield ApiServer(api, f"http://127.0.0.1:{server.server_address[1]}", token_file)
    finally:
        server.shutdown()
        server.server_close()
