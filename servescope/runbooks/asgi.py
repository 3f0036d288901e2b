"""The runbook service's ASGI wrappers: what is decided from the request head alone, before the app.

`BodyLimit` answers 413 to a request whose Content-Length is over its route's limit without reading a
byte of it; a body without a length (chunked) is capped while it is read, by `read_body`.
`CredentialsGate` answers 401 to a post that carries no valid credentials as soon as its head is in: a
flood of such posts (hundreds of clients cut off and connecting again) then costs the event loop a
header check each, not a trip through the framework's middleware and router, so the webhook and
/healthz keep answering in milliseconds beside it.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import anyio
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from servescope.core.errors import ServescopeError

DEFAULT_BODY_LIMIT = 65_536  # a step run's JSON: 64 labels of at most 1 KiB each fit
WEBHOOK_BODY_LIMIT = 1_048_576


BODY_TIMEOUT = 10.0  # seconds a client has to send a body once its headers are in


class BodyTimeoutError(ServescopeError, ValueError):
    """A body not sent whole within BODY_TIMEOUT."""

    reason = "body_timeout"


class BodyTooLargeError(ServescopeError, ValueError):
    """A request body over its route's limit; the message names the limit."""

    reason = "body_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body over the limit of {limit} bytes")
        self.limit = limit


def declared_length(request: Request) -> int | None:
    """The Content-Length, None without one; ValueError when it is not a number."""
    value = request.headers.get("content-length")
    if value is None:
        return None
    if not value.strip().isdigit():
        raise ValueError(f"invalid Content-Length {value[:40]!r}")
    return int(value)


async def read_body(request: Request, limit: int, timeout: float = BODY_TIMEOUT) -> bytes:
    """The body, refused (BodyTooLargeError) as soon as it passes `limit`, whatever Content-Length said,
    and (BodyTimeoutError) when it is not whole within `timeout` seconds."""
    declared = declared_length(request)
    if declared is not None and declared > limit:
        raise BodyTooLargeError(limit)
    body = bytearray()
    try:
        with anyio.fail_after(timeout):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise BodyTooLargeError(limit)
    except TimeoutError:
        raise BodyTimeoutError(f"request body not sent within {timeout:g}s") from None
    return bytes(body)


async def _answer(
    send: Send, status: int, message: str, key: str = "detail", extra: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    data = json.dumps({key: message}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        (b"connection", b"close"),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


class BodyLimit:
    """413 for a declared Content-Length over `limit_for(path)`, before the app or the body is read;
    a path whose limit is None is left to its route (which checks and records the request itself)."""

    def __init__(self, app: ASGIApp, limit_for: Callable[[str], int | None]) -> None:
        self.app, self.limit_for = app, limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.limit_for(scope["path"]) if scope["type"] == "http" else None
        if limit is not None:
            for name, value in scope["headers"]:
                if name != b"content-length":
                    continue
                if not value.strip().isdigit():
                    await _answer(send, 400, "invalid Content-Length")
                    return
                if int(value) > limit:
                    await _answer(send, 413, f"request body over the limit of {limit} bytes")
                    return
        await self.app(scope, receive, send)


class CredentialsGate:
    """401 (with `challenge` as WWW-Authenticate, `on_refused` called to count it) for a POST to `path`
    whose Authorization header `allows` refuses; everything else goes on to the app, which checks the
    credentials again, so the gate only answers sooner and never lets more through."""

    def __init__(
        self,
        app: ASGIApp,
        path: str,
        allows: Callable[[str | None], bool],
        challenge: str,
        on_refused: Callable[[], None],
    ) -> None:
        self.app, self.path, self.allows, self.on_refused = app, path, allows, on_refused
        self.challenge = ((b"www-authenticate", challenge.encode()),)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == self.path and scope["method"] == "POST":
            given = next((v for k, v in scope["headers"] if k == b"authorization"), None)
            if not self.allows(given.decode("latin-1") if given is not None else None):
                self.on_refused()
                await _answer(send, 401, "unauthorized", "error", self.challenge)
                return
        await self.app(scope, receive, send)
