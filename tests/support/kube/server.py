"""A fake Kubernetes API server: the real REST paths, Status objects, bearer tokens as ServiceAccounts,
and RBAC evaluated from the rendered Roles and bindings (`rbac.py`).

    GET    /api/v1/nodes/{n}                 PATCH /api/v1/nodes/{n}
    GET    /api/v1/pods?fieldSelector=spec.nodeName=N  (and ?watch=1: a stream of watch events, from a
           resourceVersion, with bookmarks, as PartialObjectMetadata when asked: watching.py)
    GET    /api/v1/namespaces/{ns}/pods       POST  /api/v1/namespaces/{ns}/pods/{p}/eviction
    GET    /apis/policy/v1/namespaces/{ns}/poddisruptionbudgets
    GET    /apis/apps/v1/namespaces/{ns}/deployments/{d}   PATCH the same, and .../{d}/scale
    GET    /apis/apps/v1/namespaces/{ns}/replicasets?labelSelector=...  (the whole selector grammar)
    GET    /apis/argoproj.io/v1alpha1/namespaces/{ns}/rollouts/{r}   PATCH the same, and .../{r}/status
    GET    /apis/{group}/{version}/namespaces/{ns}/{plural}[/{name}]  any resource the test installs

A PATCH is a merge, strategic merge or JSON patch (RFC 6902, with `test`: a failed one is the real 422);
Deployments, ReplicaSets and Rollouts keep their status apart (`/status`) and count `generation`.

Every request is recorded (method, path, query, content type, body, who, status) so a test can compare
what a dry run printed with what the execution sent.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from servescope_sim.kube_api import send_json
from tests.support.http_fakes import QuietServer
from tests.support.kube.errors import ApiStatusError
from tests.support.kube.rbac import Rbac, Request
from tests.support.kube.selectors import selected
from tests.support.kube.store import KINDS, WITH_STATUS, Store
from tests.support.kube.watching import as_metadata, bookmark, follow, metadata_list, wants_metadata

WATCH_SECONDS = 30.0
JSON_PATCH = "application/json-patch+json"
PATCH_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json", JSON_PATCH)


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    failure = code >= 400
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure" if failure else "Success",
        "message": message,
        "reason": reason,
        "code": code,
    }


@dataclass
class Route:
    group: str
    version: str
    namespace: str | None
    plural: str
    name: str | None
    sub: str | None

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def resource(self) -> str:
        return f"{self.plural}/{self.sub}" if self.sub else self.plural


def parse_path(path: str) -> Route | None:
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not 1 <= len(rest) <= 3:
        return None
    return Route(
        group,
        version,
        namespace,
        rest[0],
        rest[1] if len(rest) > 1 else None,
        rest[2] if len(rest) > 2 else None,
    )


@dataclass
class FakeApi:
    store: Store
    rbac: Rbac
    tokens: dict[str, tuple[str, str]]  # bearer token -> ServiceAccount (namespace, name)
    installed: set[tuple[str, str]] = field(default_factory=lambda: set(KINDS))
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(entry)

    def changes(self) -> list[dict[str, Any]]:
        """The requests that were not reads."""
        with self.lock:
            return [r for r in self.requests if r["method"] not in ("GET", "HEAD")]


def _verb(method: str, route: Route, query: dict[str, list[str]]) -> str:
    if method == "GET":
        if route.name is None:
            return "watch" if query.get("watch", ["0"])[0] in ("1", "true") else "list"
        return "get"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api: FakeApi

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _send(self, code: int, body: dict[str, Any]) -> None:
        send_json(self, code, body)

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        entry: dict[str, Any] = {
            "method": method,
            "path": url.path,
            "query": url.query,
            "content_type": self.headers.get("Content-Type", "").split(";")[0] or None,
            "body": body,
        }
        try:
            code, answer = self._dispatch(method, url.path, query, body, entry)
        except ApiStatusError as exc:
            code, answer = exc.code, status(exc.code, exc.reason, exc.message)
        entry["status"] = code
        self.api.record(entry)
        if answer is not None:
            self._send(code, answer)

    def _user(self) -> tuple[str, str]:
        token = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        account = self.api.tokens.get(token)
        if account is None:
            raise ApiStatusError(401, "Unauthorized", "Unauthorized")
        return account

    def _dispatch(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, entry: dict[str, Any]
    ) -> tuple[int, dict[str, Any] | None]:
        account = self._user()
        user = f"system:serviceaccount:{account[0]}:{account[1]}"
        entry["user"] = user
        route = parse_path(path)
        if route is None or route.key not in self.api.installed:
            raise ApiStatusError(404, "NotFound", "the server could not find the requested resource")
        request = Request(
            _verb(method, route, query), route.group, route.resource, route.namespace, route.name
        )
        if not self.api.rbac.allows(account, request):
            raise ApiStatusError(403, "Forbidden", request.denial(user))
        if method == "PATCH" and entry["content_type"] not in PATCH_TYPES:
            raise ApiStatusError(415, "UnsupportedMediaType", f"unknown body format: {entry['content_type']}")
        if route.name is None and method == "GET":
            return self._collection(route, request.verb, query)
        return self._object(method, route, body, entry["content_type"])

    def _collection(
        self, route: Route, verb: str, query: dict[str, list[str]]
    ) -> tuple[int, dict[str, Any] | None]:
        items = selected(self.api.store.list(route.key, route.namespace), query)
        if verb == "watch":
            self._watch(route, items, query)
            return 200, None
        version = self.api.store.version()
        if wants_metadata(self.headers.get("Accept")):
            return 200, metadata_list(items, version)
        kind = KINDS.get(route.key, (route.plural.capitalize(), "", True))[0]
        return 200, {
            "kind": f"{kind}List",
            "apiVersion": route.version,
            "metadata": {"resourceVersion": str(version)},
            "items": items,
        }

    def _object(
        self, method: str, route: Route, body: Any, content_type: str | None
    ) -> tuple[int, dict[str, Any] | None]:
        store, name, namespace = self.api.store, route.name or "", route.namespace
        if route.sub == "eviction" and method == "POST" and route.plural == "pods":
            store.evict(namespace or "", name)
            return 201, status(201, "", "")
        if route.sub == "scale" and route.plural == "deployments":
            if method == "GET":
                return 200, store.scale(namespace or "", name)
            return 200, store.patch_scale(namespace or "", name, body or {})
        if route.sub == "status" and route.key in WITH_STATUS and method in ("GET", "PATCH"):
            if method == "GET":
                return 200, store.get(route.key, namespace, name)
            return 200, store.patch_status(route.key, namespace, name, body or {})
        if route.sub is not None:
            raise ApiStatusError(404, "NotFound", "the server could not find the requested resource")
        if method == "GET":
            return 200, store.get(route.key, namespace, name)
        if method == "PATCH" and content_type == JSON_PATCH:
            return 200, store.json_patch(route.key, namespace, name, body)
        if method in ("PATCH", "PUT"):
            return 200, store.patch(route.key, namespace, name, body or {})
        if method == "DELETE":
            store.get(route.key, namespace, name)
            store.delete(route.key, namespace, name)
            return 200, status(200, "", "")
        raise ApiStatusError(405, "MethodNotAllowed", f"{method} is not supported here")

    def _watch(self, route: Route, items: list[dict[str, Any]], query: dict[str, list[str]]) -> None:
        """A watch stream (watching.py) until timeoutSeconds (at most WATCH_SECONDS) or a disconnect."""
        since, log = (query.get("resourceVersion") or [""])[0], self.api.store.log
        found = log.subscribe(route.key, since, urlsplit(self.path).query)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        metadata = wants_metadata(self.headers.get("Accept"))

        def send(kind: str, obj: dict[str, Any]) -> None:
            namespace = (obj.get("metadata") or {}).get("namespace")
            if route.namespace in (None, namespace) and selected([obj], query):
                self._chunk({"type": kind, "object": as_metadata(obj) if metadata else obj})

        try:
            seconds = min(float((query.get("timeoutSeconds") or [str(WATCH_SECONDS)])[0]), WATCH_SECONDS)
            if found is None or not follow(found, items if since in ("", "0") else [], send, seconds):
                expired = status(410, "Expired", f"too old resource version: {since} ({log.oldest})")
                self._chunk({"type": "ERROR", "object": expired})
            elif (query.get("allowWatchBookmarks") or [""])[0] == "true":
                self._chunk(bookmark(route.key, self.api.store.version()))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
        finally:
            if found is not None:
                log.unsubscribe(found[1])
            self.close_connection = True

    def _chunk(self, event: dict[str, Any]) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def serve(api: FakeApi, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """The server, listening (call `serve_forever` on a thread, `shutdown` to stop)."""
    handler = type("BoundHandler", (Handler,), {"api": api})
    server = QuietServer((host, port), handler)
    server.daemon_threads = True
    return server
