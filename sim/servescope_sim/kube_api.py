"""The simulated node's API server (cluster.py's state), read-only, on loopback, speaking the real REST
paths and formats of what servescope reads:

    GET /api/v1/pods?fieldSelector=spec.nodeName=N   a PodList; with watch=true, a stream of watch events
        from resourceVersion (ADDED, DELETED, a BOOKMARK at the end with allowWatchBookmarks), ended after
        timeoutSeconds (at most a minute); PartialObjectMetadata when the Accept header asks for it
    GET /apis/apps/v1/namespaces/{ns}/replicasets?labelSelector=...   the Deployment's ReplicaSets
    GET /apis/apps/v1/namespaces/{ns}/deployments/{name}

Anything else is the API server's 404 Status; a write is refused (405) and changes nothing: the demo's
change steps are dry runs, which print what they would send. No authentication: it listens on loopback
for the demo's own processes.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from servescope.core.listen import parse_listen
from servescope_sim.cluster import NAMESPACE, ClusterState

MAX_WATCH_SECONDS = 60.0
_TERM = re.compile(
    r"\s*(!?)([A-Za-z0-9_./-]+)\s*(?:(==|=|!=)\s*([^,\s]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*(?:,|$)"
)


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def selects(selector: str, labels: dict[str, str]) -> bool:
    """Kubernetes' label selector grammar: k=v, k==v, k!=v, k in (a,b), k notin (a,b), k, !k."""
    position = 0
    while position < len(selector.strip()):
        term = _TERM.match(selector, position)
        if term is None or term.end() == position:
            return False
        negated, key, op, value, set_op, values = term.groups()
        present = key in labels
        if set_op:
            wanted = {v.strip() for v in values.split(",")}
            holds = present and labels[key] in wanted if set_op == "in" else labels.get(key) not in wanted
        elif op:
            holds = (labels.get(key) == value) if op in ("=", "==") else labels.get(key) != value
        else:
            holds = present != bool(negated)
        if not holds:
            return False
        position = term.end()
    return True


def _metadata_only(accept: str | None) -> bool:
    return "as=PartialObjectMetadata" in (accept or "").split(",")[0]


def send_json(handler: BaseHTTPRequestHandler, code: int, body: dict[str, Any]) -> None:
    """One JSON answer with its length, as the API server sends an object, a list or a Status."""
    data = json.dumps(body).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: ClusterState

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, code: int, body: dict[str, Any]) -> None:
        send_json(self, code, body)

    def _refuse(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        message = "the simulated cluster is read-only: a change step's dry run prints what it would send"
        self._send(405, _status(405, "MethodNotAllowed", message))

    def do_POST(self) -> None:
        self._refuse()

    def do_PUT(self) -> None:
        self._refuse()

    def do_PATCH(self) -> None:
        self._refuse()

    def do_DELETE(self) -> None:
        self._refuse()

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        parts = [p for p in url.path.split("/") if p]
        if parts == ["api", "v1", "pods"]:
            self._pods(query)
        elif parts == ["apis", "apps", "v1", "namespaces", NAMESPACE, "replicasets"]:
            found = [
                rs
                for rs in self.state.replicasets()
                if selects(query.get("labelSelector", ""), rs["metadata"]["labels"])
            ]
            self._send(
                200, {"kind": "ReplicaSetList", "apiVersion": "apps/v1", "metadata": {}, "items": found}
            )
        elif parts[:5] == ["apis", "apps", "v1", "namespaces", NAMESPACE] and parts[5:] == [
            "deployments",
            self.state.deployment()["metadata"]["name"],
        ]:
            self._send(200, self.state.deployment())
        else:
            self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))

    def _shown(self, obj: dict[str, Any]) -> dict[str, Any]:
        if _metadata_only(self.headers.get("Accept")):
            return {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        return obj

    def _pods(self, query: dict[str, str]) -> None:
        node = query.get("fieldSelector", "").removeprefix("spec.nodeName=")
        ours = node in ("", self.state.node)
        if query.get("watch") in ("true", "1"):
            self._watch(query, ours)
            return
        pods, version = self.state.listing()
        items = [self._shown(p) for p in pods] if ours else []
        kind = "PartialObjectMetadataList" if _metadata_only(self.headers.get("Accept")) else "PodList"
        self._send(
            200,
            {"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": str(version)}, "items": items},
        )

    def _watch(self, query: dict[str, str], ours: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        since = int(query.get("resourceVersion") or 0)
        seconds = min(float(query.get("timeoutSeconds") or MAX_WATCH_SECONDS), MAX_WATCH_SECONDS)
        deadline, state = time.monotonic() + seconds, self.state
        try:
            if since == 0:  # no resourceVersion: what exists first, as ADDED
                pods, since = state.listing()
                for found in pods if ours else []:
                    self._event("ADDED", found)
            while (left := deadline - time.monotonic()) > 0:
                news = self._after(since, left)
                for change in news if ours else []:
                    self._event(change.kind, change.obj)
                since = max([since, *(c.version for c in news)])
            if query.get("allowWatchBookmarks") == "true":
                self._chunk(
                    {
                        "type": "BOOKMARK",
                        "object": {
                            "kind": "Pod",
                            "apiVersion": "v1",
                            "metadata": {"resourceVersion": str(since)},
                        },
                    }
                )
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client went away
        self.close_connection = True

    def _after(self, since: int, seconds: float) -> list[Any]:
        """The changes after resourceVersion `since`, once there are some or after `seconds`."""
        state = self.state
        with state.changed:
            state.changed.wait_for(lambda: state.version > since, timeout=seconds)
            return [c for c in state.changes if c.version > since]

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        self._chunk({"type": kind, "object": self._shown(obj)})

    def _chunk(self, event: dict[str, Any]) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class SimulatedApiServer:
    """The server on its own thread; bound when made, so that its URL is known before it starts."""

    def __init__(self, state: ClusterState, listen: str) -> None:
        address = parse_listen(listen)
        handler = type("ClusterHandler", (_Handler,), {"state": state})
        self._server = ThreadingHTTPServer((address.host or "127.0.0.1", address.port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="sim-kube-api", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
