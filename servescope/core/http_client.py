"""The one bounded HTTP client of servescope: a total deadline, a cap on decoded bytes, no redirects.

A slow peer can trickle a byte just inside every per-read timeout, and send its response head that way
too; so the deadline is checked on every socket operation (connect, send, each read of the head and of
the body), each one given only what is left of it: a request ends at its deadline whatever the peer
does. The body is decoded as it streams in and its decoded size is counted as it is produced
(`decoding.CappedBody`). Redirects are not followed (an answer's Location never chooses a host), no
environment proxy is used, and an `address_policy` may refuse the addresses a name resolves to: it is
asked about the very address connected to, so a name that resolves differently the second time (DNS
rebinding) or an address written in an unusual spelling is judged by the address itself.

Used by the exporter's scraping sources (`exporter/sources/bounded_http.py` adapts its errors) and by
the runbook service's read and change steps.
"""

from __future__ import annotations

import ipaddress
import json as jsonlib
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from servescope.core.decoding import CHUNK, CappedBody, FetchError, encodings
from servescope.core.errors import ServescopeError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Why an address may not be connected to (a sentence naming it), None when it may.
AddressPolicy = Callable[[str, IPAddress], str | None]
_local = threading.local()


def _time_left(timeout: float | None, error: type[Exception]) -> float | None:
    """The per-operation timeout, cut to what is left of this thread's total deadline."""
    deadline: float | None = getattr(_local, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the total deadline of the request passed")
    return left if timeout is None else min(timeout, left)


def seconds_left() -> float | None:
    """What is left of the total deadline of this thread's request in flight; None outside one."""
    deadline: float | None = getattr(_local, "deadline", None)
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _time_left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _time_left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        bounded = _time_left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, bounded))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _RefusedAddressError(ServescopeError, httpcore.ConnectError):
    """Every address the host resolves to is refused by the policy; the message says why."""

    reason = "refused_address"


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, policy: AddressPolicy | None) -> None:
        self._inner = httpcore.SyncBackend()
        self._policy = policy

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _time_left(timeout, httpcore.ConnectTimeout)
        target = host if self._policy is None else self._checked(host, port)
        return _DeadlineStream(self._inner.connect_tcp(target, port, bounded, local_address, socket_options))

    def _checked(self, host: str, port: int) -> str:
        """The first address of `host` the policy allows; the connection goes to that address."""
        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from None
        reasons = []
        assert self._policy is not None
        for row in found:
            address = ipaddress.ip_address(str(row[4][0]).split("%")[0])
            reason = self._policy(host, address)
            if reason is None:
                return str(address)
            reasons.append(reason)
        raise _RefusedAddressError("; ".join(dict.fromkeys(reasons)))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


@dataclass(frozen=True)
class Answer:
    """A whole answer, read within its bounds."""

    url: str
    status_code: int
    content: bytes | bytearray
    content_type: str = ""

    @property
    def text(self) -> str:
        return bytes(self.content).decode("utf-8", "replace")

    def json(self) -> Any:
        return jsonlib.loads(self.content)


class _ClosedBeforeAnswerError(ServescopeError):
    """The connection closed before any of the response arrived; the httpx error is its __cause__."""

    reason = "closed_before_answer"


class BoundedClient:
    """Thread-safe requests, each within `timeout` seconds in total and `max_bytes` of decoded body."""

    def __init__(
        self,
        *,
        timeout: float,
        max_bytes: int,
        headers: Mapping[str, str] | None = None,
        address_policy: AddressPolicy | None = None,
    ) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        transport = httpx.HTTPTransport()
        # httpx takes no network backend: its pool is rebuilt over the deadline-checking one.
        transport._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(), network_backend=_DeadlineBackend(address_policy)
        )
        # trust_env off: a peer is reached directly, never through an environment proxy.
        self._client = httpx.Client(
            transport=transport,
            timeout=timeout,
            follow_redirects=False,
            trust_env=False,
            headers={**(headers or {}), "Accept-Encoding": "gzip, deflate"},
        )

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        max_bytes: int | None = None,
        on_grow: Callable[[int], None] | None = None,
    ) -> Answer:
        """The answer, whatever its status; FetchError with reason connect, timeout, too_large, parse or
        refused when there is no whole answer within the bounds."""
        seconds = self.timeout if timeout is None else timeout
        _local.deadline = time.monotonic() + seconds
        exchange = _Exchange(
            method, url, params, json, headers, seconds, max_bytes or self.max_bytes, on_grow
        )
        try:
            try:
                return exchange.once(self._client)
            except _ClosedBeforeAnswerError:
                # The peer closed a pooled keep-alive connection as the request went out (uvicorn closes
                # idle ones after 5 s). Nothing was received: once more, on a new connection, same deadline.
                try:
                    return exchange.once(self._client)
                except _ClosedBeforeAnswerError as exc:
                    raise FetchError("connect", f"{url}: {exc.__cause__}") from None
        finally:
            _local.deadline = None

    def get(self, url: str, *, on_grow: Callable[[int], None] | None = None) -> bytearray:
        """The body of a 200 answer; FetchError (http_status for any other status) otherwise."""
        answer = self.request("GET", url, on_grow=on_grow)
        if answer.status_code != 200:
            raise FetchError("http_status", f"{url} answered HTTP {answer.status_code}")
        return bytearray(answer.content)

    def close(self) -> None:
        self._client.close()


@dataclass(frozen=True)
class _Exchange:
    method: str
    url: str
    params: Mapping[str, str] | None
    body: Any
    headers: Mapping[str, str] | None
    seconds: float
    max_bytes: int
    on_grow: Callable[[int], None] | None

    def once(self, client: httpx.Client) -> Answer:
        answered = False
        try:
            with client.stream(
                self.method, self.url, params=self.params, json=self.body, headers=self.headers
            ) as response:
                answered = True
                declared = response.headers.get("content-length", "")
                if (
                    declared.isdigit()
                    and int(declared) > self.max_bytes
                    and not response.headers.get("content-encoding")
                ):
                    raise FetchError(
                        "too_large",
                        f"{self.url}: answer larger than {self.max_bytes} bytes ({declared} declared): "
                        "refused before it was read",
                    )
                codings = encodings(response.headers.get_list("content-encoding"))
                body = CappedBody(self.url, self.max_bytes, codings, self.on_grow)
                for raw in response.iter_raw(CHUNK):
                    body.feed(raw)
                content = body.finish()
                kind = response.headers.get("content-type", "")
                return Answer(str(response.url), response.status_code, content, kind)
        except httpx.TimeoutException:
            raise FetchError(
                "timeout", f"{self.url}: no whole answer within {self.seconds:g}s (total deadline)"
            ) from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            if not answered:
                raise _ClosedBeforeAnswerError from exc
            raise FetchError("connect", f"{self.url}: {exc}") from None
        except httpx.ConnectError as exc:
            refused = isinstance(exc.__cause__, _RefusedAddressError)
            raise FetchError("refused" if refused else "connect", f"{self.url}: {exc}") from None
        except httpx.HTTPError as exc:
            raise FetchError("connect", f"{self.url}: {exc}") from None
