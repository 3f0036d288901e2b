"""A small cluster on loopback for the live pages test: simulated vLLM engines as pods a PodMonitor would
scrape (Prometheus' file service discovery, each pod's labels as the PodMonitor relabels them), a real
exporter on a simulated node, kube-state-metrics' answer for the pods and nodes, and the webhooks of the
pager, ticket and heartbeat receivers, recording what Alertmanager sends them.

The fake is at the Kubernetes boundary only: what kube-state-metrics would say, and which pods exist
(the file Prometheus discovers them from). Engines, exporter, Prometheus and Alertmanager are real.
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx

from tests.support import Served, free_port, start_child, stop
from tests.support.http_fakes import QuietServer

ENGINE_LISTENING = r"sim-vllm serving on 127\.0\.0\.1:(\d+)"


@dataclass
class Pod:
    """One engine pod: its labels and port; its process once it listens."""

    name: str
    model: str
    node: str
    port: int = field(default_factory=free_port)
    served: Served | None = None
    terminating: bool = False

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def target(self) -> dict[str, Any]:
        labels = {"instance": self.node, "namespace": "llm", "pod": self.name, "container": "vllm"}
        return {"targets": [f"127.0.0.1:{self.port}"], "labels": {**labels, "endpoint": self.endpoint}}

    def start(self) -> None:
        """The container starts: its server listens once the model is loaded (here, at once)."""
        argv = [sys.executable, "-m", "servescope_sim.vllm_server", "--listen", f"127.0.0.1:{self.port}"]
        argv += ["--model-name", self.model, "--arrival-rate", "0.5", "--exit-with-parent"]
        self.served = start_child(f"engine-{self.name}", argv, ENGINE_LISTENING, 60, ready="/health")

    def control(self, down: bool) -> None:
        """Its engine core dies (the server answers 503) or comes back: a container crash and restart."""
        assert self.served is not None
        httpx.post(f"{self.served.base}/control", json={"down": down}, timeout=5).raise_for_status()

    def stop(self) -> None:
        if self.served is not None:
            stop(self.served)
            self.served = None


class Cluster:
    """The pods Prometheus discovers (a file it re-reads), kube-state-metrics' answer, and the receivers."""

    def __init__(self, folder: Path) -> None:
        self.pods: dict[str, Pod] = {}
        self.sd_file = folder / "pods.json"
        self.received: dict[str, list[dict[str, Any]]] = {}
        self.lock = threading.Lock()
        self._write()
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = cluster.kube_state_metrics().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(min(length, 1 << 20)) or b"{}")
                with cluster.lock:
                    cluster.received.setdefault(self.path, []).append(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _write(self) -> None:
        listed = [pod.target() for pod in self.pods.values()]
        tmp = self.sd_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(listed))
        tmp.replace(self.sd_file)  # Prometheus never reads half a file

    def kube_state_metrics(self) -> str:
        """node-a has 2 GPUs (the exporter's node), node-b none; the pods being deleted."""
        lines = [
            'kube_node_info{node="node-a"} 1',
            'kube_node_info{node="node-b"} 1',
            'kube_node_status_capacity{node="node-a",resource="nvidia_com_gpu"} 2',
        ]
        lines += [
            f'kube_pod_deletion_timestamp{{namespace="llm",pod="{pod.name}"}} 1.7e+09'
            for pod in self.pods.values()
            if pod.terminating
        ]
        return "\n".join(lines) + "\n"

    def create(self, pod: Pod) -> Pod:
        """A new pod: scheduled and discovered, its engine not listening yet (loading its model)."""
        self.pods[pod.name] = pod
        self._write()
        return pod

    def delete(self, name: str) -> None:
        """Kubernetes deletes a pod: it is terminating (its engine stops), then gone."""
        pod = self.pods[name]
        pod.terminating = True
        pod.stop()

    def forget(self, name: str) -> None:
        """The pod is gone: out of the discovered targets and of kube-state-metrics."""
        self.pods.pop(name).stop()
        self._write()

    def notifications(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.received.get(path, []))

    def close(self) -> None:
        for pod in list(self.pods.values()):
            pod.stop()
        self.server.shutdown()
        self.server.server_close()
