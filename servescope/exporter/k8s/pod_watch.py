"""The API server's list and watch of one node's pods, metadata only: the protocol half of pod_labels.py.

- list: `GET /api/v1/pods?fieldSelector=spec.nodeName=<node>&limit=500`, pages followed by `continue`;
- watch: the same with `watch=true&resourceVersion=<the list's>&allowWatchBookmarks=true&timeoutSeconds=T`,
  one JSON event a line: ADDED, MODIFIED, DELETED, BOOKMARK (the resourceVersion moved on, nothing of
  ours changed), ERROR (a Status; 410 when the resourceVersion is older than the API server keeps).

Both ask for PartialObjectMetadata (`Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;
v=v1`): the API server sends each pod's metadata and not its spec, so the exporter never receives a
container's environment or volumes, and a pod costs a few hundred bytes instead of kilobytes. A server
that does not offer it sends whole pods (the Accept header's fallback), of which the same fields are read.

Everything read is bounded: a page, an event line; the answers are the API server's, but a proxy in
between or a pod with megabytes of annotations must not grow the exporter without limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx2

from servescope.core.errors import ServescopeError

PODS = "/api/v1/pods"
LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json"
WATCH_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json"
PAGE_SIZE = 500
MAX_PAGE_BYTES = 16 * 1024 * 1024
MAX_EVENT_BYTES = 1024 * 1024  # a pod's metadata is a few KiB; a whole pod is below etcd's 1.5 MiB
_REASONS = {401: "unauthorized", 403: "forbidden", 404: "not_found", 429: "throttled"}


class WatchError(ServescopeError):
    """A list or watch failed; `reason` is a bounded label (forbidden, timeout, unavailable, ...)."""

    reason = "unavailable"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, reason=reason)


class ExpiredError(WatchError):
    """410 Gone: the resourceVersion is older than the API server keeps; only a new list can follow."""


@dataclass(frozen=True, slots=True)
class PodMeta:
    namespace: str
    name: str
    labels: Mapping[str, str]
    resource_version: str


@dataclass(frozen=True, slots=True)
class Event:
    kind: str  # ADDED, MODIFIED, DELETED or BOOKMARK
    pod: PodMeta | None  # None for a BOOKMARK
    resource_version: str


def _status_error(code: int, status: Mapping[str, Any] | None, what: str) -> WatchError:
    message = str((status or {}).get("message") or "")[:300]
    text = f"{what}: HTTP {code} {(status or {}).get('reason') or ''!s}: {message}".rstrip(": ")
    if code == 410:
        return ExpiredError("expired", text)
    reason = _REASONS.get(code) or ("server_error" if code >= 500 else f"http_{code}")
    return WatchError(reason, text)


def _transport_error(exc: httpx2.HTTPError, what: str) -> WatchError:
    reason = "timeout" if isinstance(exc, httpx2.TimeoutException) else "unavailable"
    return WatchError(reason, f"{what}: {type(exc).__name__}: {exc}"[:400])


def _body(response: httpx2.Response, limit: int, what: str) -> bytes:
    data = bytearray()
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) > limit:
            raise WatchError("too_large", f"{what}: more than {limit} bytes")
    return bytes(data)


def _json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except ValueError as exc:
        raise WatchError("bad_response", f"{what}: not JSON: {exc}") from None


def _checked(response: httpx2.Response, what: str) -> None:
    if response.status_code != 200:
        body = _body(response, 64 * 1024, what)
        try:
            status = json.loads(body)
        except ValueError:
            status = None
        raise _status_error(response.status_code, status if isinstance(status, dict) else None, what)


def pod_meta(obj: Any) -> PodMeta | None:
    """The fields read of one pod (or of its PartialObjectMetadata); None when it has no name."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or not meta.get("name"):
        return None
    labels = meta.get("labels")
    kept = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}
    return PodMeta(
        str(meta.get("namespace") or ""), str(meta["name"]), kept, str(meta.get("resourceVersion") or "")
    )


def _selector(node: str) -> str:
    return f"spec.nodeName={node}"


def list_pods(client: httpx2.Client, node: str, *, consistent: bool) -> tuple[list[PodMeta], str]:
    """The node's pods and the list's resourceVersion. Not `consistent`: resourceVersion=0, served from
    the API server's watch cache (cheap; what a first list can take). `consistent`: the latest state
    (after a 410, when the cache may be what was too old)."""
    what, pods, token = f"list of the pods of node {node}", [], ""
    while True:
        params = {"fieldSelector": _selector(node), "limit": str(PAGE_SIZE)}
        if token:
            params["continue"] = token
        elif not consistent:
            params["resourceVersion"] = "0"
        try:
            with client.stream("GET", PODS, params=params, headers={"Accept": LIST_ACCEPT}) as response:
                _checked(response, what)
                page = _json(_body(response, MAX_PAGE_BYTES, what), what)
        except httpx2.HTTPError as exc:
            raise _transport_error(exc, what) from None
        if not isinstance(page, dict) or not isinstance(page.get("items"), list):
            raise WatchError("bad_response", f"{what}: not a list of pods")
        pods += [found for found in map(pod_meta, page["items"]) if found is not None]
        meta: dict[str, Any] = page["metadata"] if isinstance(page.get("metadata"), dict) else {}
        token = str(meta.get("continue") or "")
        if not token:
            return pods, str(meta.get("resourceVersion") or "")


def _lines(chunks: Iterator[bytes], what: str) -> Iterator[bytes]:
    pending = b""
    for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from (line for line in complete if line.strip())
        if len(pending) > MAX_EVENT_BYTES:
            raise WatchError("too_large", f"{what}: an event of more than {MAX_EVENT_BYTES} bytes")


def _event(line: bytes, what: str) -> Event:
    event = _json(line, what)
    kind = event.get("type") if isinstance(event, dict) else None
    obj = event.get("object") if isinstance(event, dict) else None
    status: dict[str, Any] = obj if isinstance(obj, dict) else {}
    if kind == "ERROR":
        code = status.get("code")
        raise _status_error(code if isinstance(code, int) else 500, status, what)
    meta = status.get("metadata")
    version = str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""
    if kind == "BOOKMARK":
        return Event("BOOKMARK", None, version)
    pod = pod_meta(obj)
    if kind not in ("ADDED", "MODIFIED", "DELETED") or pod is None:
        raise WatchError("bad_response", f"{what}: not a watch event of a pod: {line[:200]!r}")
    return Event(kind, pod, version)


def watch_pods(
    client: httpx2.Client,
    node: str,
    resource_version: str,
    timeout_seconds: int,
    opened: Callable[[], None] = lambda: None,
) -> Iterator[Event]:
    """The node's pod events after `resource_version`, until the API server ends the watch (after about
    `timeout_seconds`); `opened` is called once it answered 200. WatchError (ExpiredError: list again)."""
    what = f"watch of the pods of node {node}"
    params = {
        "fieldSelector": _selector(node),
        "watch": "true",
        "resourceVersion": resource_version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(timeout_seconds),
    }
    # Nothing may arrive for the whole watch on a quiet node: the read deadline is the watch's own, plus
    # a margin for the server to end it; past that the connection is dead and the watch starts again.
    deadline = httpx2.Timeout(10.0, read=timeout_seconds + 30.0)
    try:
        with client.stream(
            "GET", PODS, params=params, headers={"Accept": WATCH_ACCEPT}, timeout=deadline
        ) as response:
            _checked(response, what)
            opened()
            for line in _lines(response.iter_bytes(), what):
                yield _event(line, what)
    except httpx2.HTTPError as exc:
        raise _transport_error(exc, what) from None
