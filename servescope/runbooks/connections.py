"""The runbook service's bounds on connections: how many, and how long a client may take to ask.

uvicorn closes idle keep-alive connections but waits forever for the rest of a half-sent request, and
accepts any number of connections (each an fd and a buffer). `GuardedH11` keeps at most
`max_connections` open: one more evicts the oldest connection that is not in a request (half-sent, or
idle), so a flood of half-sent connections evicts itself and a new client is still answered (when
every connection is in a request, the new one is closed instead); and it closes a connection whose
request headers are not complete within `header_timeout` seconds of its opening or previous answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol


def _idle(protocol: H11Protocol) -> bool:
    return protocol.cycle is None or protocol.cycle.response_complete


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with the connection cap and the header timeout (see the module)."""

    max_connections = 200
    header_timeout = 10.0
    _header_timer: asyncio.TimerHandle | None = None
    _armed_for: Any = None
    _opened = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._opened = self.loop.time()
        if len(self.connections) > self.max_connections and not self._evict():
            transport.close()
            return
        self._arm()

    def _evict(self) -> bool:
        """Close the oldest other connection not in a request; False when there is none."""
        others = [c for c in self.connections if c is not self and isinstance(c, GuardedH11)]
        idle = [c for c in others if _idle(c) and not c.transport.is_closing()]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c._opened)
        oldest.transport.close()
        self.connections.discard(oldest)
        return True

    def _arm(self) -> None:
        self._disarm()
        self._armed_for = self.cycle
        self._header_timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        if self.cycle is self._armed_for and not self.transport.is_closing():
            self.transport.close()  # no whole request since the timer was set

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not self._armed_for:
            self._disarm()  # a request's headers are in: the app takes it from here

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def guarded_protocol(max_connections: int, header_timeout: float) -> type[GuardedH11]:
    """GuardedH11 with these bounds, as a class for `uvicorn.Config(http=...)`."""
    bounds = {"max_connections": max_connections, "header_timeout": header_timeout}
    return type("GuardedH11", (GuardedH11,), bounds)


def server_config(app: Any, *, max_connections: int, header_timeout: float) -> uvicorn.Config:
    """The uvicorn configuration of the runbook service: bounded, and blind to X-Forwarded-For (the
    audit names the socket peer unless --trusted-proxy says otherwise)."""
    return uvicorn.Config(
        app,
        http=guarded_protocol(max_connections, header_timeout),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=3,
        proxy_headers=False,
        limit_concurrency=max_connections + 2,  # the connection cap acts first, by eviction
        timeout_keep_alive=5,
        backlog=256,
        h11_max_incomplete_event_size=16_384,
    )
