"""A bounded HTTP GET for the sources that scrape a peer: one total deadline, a byte cap while streaming.

A slow peer can trickle a byte just inside every per-read timeout, so the deadline is checked on every
socket operation (connect, send, each read of the headers and the body), each one given only the time
left. The cap counts decompressed bytes as they are produced: a gzip bomb stops at the cap, never
inflates past it. A body beyond SMALL_BODY_BYTES needs the process's one large-body slot: however many
endpoints answer at once, at most one large page is held (and parsed, by callers holding `hold()`).
"""

from __future__ import annotations

import contextlib
import threading
import time
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore
import httpx

from servescope.exporter.sources.base import SourceError

# Real engine pages are 50-70 KB and a dcgm-exporter page for 8 GPUs about as much: ordinary pages never
# wait for the slot. A page parses into about 10 times its size, so 8 parallel small ones stay near 20 MiB.
SMALL_BODY_BYTES = 256 * 1024
_CHUNK = 64 * 1024
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


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _time_left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_tcp(host, port, bounded, local_address, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class LargeBodies:
    """At most `slots` bodies beyond SMALL_BODY_BYTES in the process at once; the others wait (within
    their deadline) so parallel scrapes never hold more than `slots` large pages."""

    def __init__(self, slots: int = 1) -> None:
        self._slots = threading.BoundedSemaphore(slots)
        self._local = threading.local()

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """A slot taken inside stays taken until the outermost `hold` of this thread ends."""
        depth: int = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth
            if depth == 0 and getattr(self._local, "held", False):
                self._local.held = False
                self._slots.release()

    def admit(self, url: str) -> None:
        """Take the slot for a body growing past SMALL_BODY_BYTES; 'timeout' when not had in time."""
        if getattr(self._local, "held", False):
            return
        deadline: float | None = getattr(_local, "deadline", None)
        wait = 0.0 if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._slots.acquire(timeout=wait):
            raise SourceError(
                "timeout", f"{url}: another large body held the memory budget past the deadline"
            )
        self._local.held = True


LARGE_BODIES = LargeBodies()


class _ClosedBeforeAnswerError(Exception):
    """The connection closed before any of the response arrived; the httpx error is its __cause__."""


class BoundedClient:
    """Thread-safe GETs, each within `timeout` seconds in total and `max_bytes` of (decoded) body."""

    def __init__(self, *, timeout: float, max_bytes: int, headers: dict[str, str] | None = None) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        transport = httpx.HTTPTransport()
        # httpx takes no network backend: its pool is rebuilt over the deadline-checking one.
        transport._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(), network_backend=_DeadlineBackend()
        )
        # trust_env off: a peer on this node is reached directly, never through an environment proxy.
        self._client = httpx.Client(
            transport=transport,
            timeout=timeout,
            follow_redirects=False,
            trust_env=False,
            headers={**(headers or {}), "Accept-Encoding": "gzip"},
        )

    def get(self, url: str) -> bytearray:
        """The body of a 200 answer; SourceError with reason connect, timeout, http_status, too_large
        or parse otherwise."""
        _local.deadline = time.monotonic() + self.timeout
        try:
            with LARGE_BODIES.hold():
                try:
                    return self._get_once(url)
                except _ClosedBeforeAnswerError:
                    # The peer closed a pooled keep-alive connection as the request went out (uvicorn,
                    # and so vLLM, closes idle ones after 5 s, the default interval). Nothing was
                    # received and a GET is safe to repeat: once, on a new connection, same deadline.
                    try:
                        return self._get_once(url)
                    except _ClosedBeforeAnswerError as exc:
                        raise SourceError("connect", f"{url}: {exc.__cause__}") from None
        finally:
            _local.deadline = None

    def _get_once(self, url: str) -> bytearray:
        answered = False
        try:
            with self._client.stream("GET", url) as response:
                answered = True
                if response.status_code != 200:
                    raise SourceError("http_status", f"{url} answered HTTP {response.status_code}")
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_bytes:
                    raise SourceError(
                        "too_large", f"{url}: {declared} bytes declared, limit {self.max_bytes}"
                    )
                return self._read_body(url, response)
        except httpx.TimeoutException:
            raise SourceError("timeout", f"{url}: no complete answer within {self.timeout:g} s") from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            if not answered:
                raise _ClosedBeforeAnswerError from exc
            raise SourceError("connect", f"{url}: {exc}") from None
        except httpx.HTTPError as exc:
            raise SourceError("connect", f"{url}: {exc}") from None

    def _read_body(self, url: str, response: httpx.Response) -> bytearray:
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", "gzip"):
            raise SourceError("parse", f"{url}: unsupported Content-Encoding {encoding!r}")
        body = _CappedBody(url, self.max_bytes, gzipped=encoding == "gzip")
        for raw in response.iter_raw(_CHUNK):
            body.feed(raw)
        return body.finish()

    def close(self) -> None:
        self._client.close()


class _CappedBody:
    """Accumulates a body, inflating gzip in steps that never produce more than the cap allows."""

    def __init__(self, url: str, max_bytes: int, *, gzipped: bool) -> None:
        self._url = url
        self._max = max_bytes
        self._inflate = zlib.decompressobj(wbits=31) if gzipped else None
        self.data = bytearray()

    def feed(self, raw: bytes) -> None:
        if self._inflate is None:
            self._grow(raw)
            return
        pending = raw
        try:
            while pending:
                out = self._inflate.decompress(pending, self._max + 1 - len(self.data))
                self._grow(out)
                pending = self._inflate.unconsumed_tail
        except zlib.error as exc:
            raise SourceError("parse", f"{self._url}: cannot decode the gzip body: {exc}") from None

    def finish(self) -> bytearray:
        if self._inflate is not None and not self._inflate.eof:
            raise SourceError("parse", f"{self._url}: the gzip body ended early")
        return self.data  # not copied: a body near the cap is held once

    def _grow(self, data: bytes) -> None:
        size = len(self.data) + len(data)
        if size > self._max:
            raise SourceError("too_large", f"{self._url}: body larger than {self._max} bytes")
        if size > SMALL_BODY_BYTES:
            LARGE_BODIES.admit(self._url)
        self.data += data
