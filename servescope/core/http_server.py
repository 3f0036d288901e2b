"""The one bounded HTTP server of servescope: uvicorn whose clients must ask in time, within caps.

uvicorn has no deadline for a request that is being sent: a client that sends half a request head, or a
whole head and then its body a byte every few seconds, holds its connection (a file descriptor, a
buffer, a place in the table) for as long as it likes. Here, for the exporter and the runbook service
alike:

- every request, head and body together, must arrive within `request_seconds` of its first byte (of the
  connection, for the first one), else the connection is closed;
- at most `max_per_ip` connections from one address (trusted proxies excepted: every client comes
  through them), so one host cannot fill the table: past it, that address's connection whose request
  has been arriving longest (else the longest idle between requests) is closed to make room, or the new
  one when every one is busy;
- past `max_connections` in all, the same, among every address's connections;
- new connections are taken from the kernel's queue ACCEPT_BATCH at a time, so a wave of them (clients
  cut off together connecting again) never holds up requests on open connections;
- a stop is bounded: `graceful_seconds` for requests in progress, then `hard_stop_seconds` after the
  signal the process exits whatever still runs.

It uses uvicorn's public configuration (`http=` takes the protocol class) and h11's public connection
states; the protocol class adds only the asyncio Protocol callbacks.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
log = logging.getLogger(__name__)
_ARRIVING = (h11.IDLE, h11.SEND_BODY)


ACCEPT_BATCH = 16  # connections accepted per readiness of the listening socket
LISTEN_BACKLOG = 2048  # uvicorn's default queue of connections not yet accepted


@dataclass(frozen=True)
class ServerBounds:
    """The bounds a server holds its clients to (see the module)."""

    request_seconds: float = 5.0
    max_connections: int = 512
    max_per_ip: int = 512  # no tighter than the total by default (the exporter: its scrapers are few)
    keep_alive_seconds: int = 5
    max_head_bytes: int = 16 * 1024  # request line plus headers; h11 answers 400 past it
    graceful_seconds: float = 1.0  # a request still running this long after SIGTERM is cancelled
    hard_stop_seconds: float = (
        1.8  # then, whatever still runs (a stuck close, a hung peer), the process exits
    )
    exempt: Networks = ()  # addresses the per-IP cap does not apply to (trusted proxies)


@dataclass
class _Table:
    """The open connections of one server, and those of each address (so that shedding one address's
    connection looks at that address's only: under a flood it runs at every new connection)."""

    bounds: ServerBounds
    open: set[BoundedH11Protocol] = field(default_factory=set)
    per_ip: dict[str, set[BoundedH11Protocol]] = field(default_factory=dict)

    def exempt(self, ip: str) -> bool:
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            return False
        return any(address.version == net.version and address in net for net in self.bounds.exempt)


class BoundedH11Protocol(H11Protocol):
    """h11 with a deadline on each request's arrival, a per-address cap and a cap that sheds the oldest
    slow sender (see the module)."""

    table: ClassVar[_Table]
    # Since when the request now arriving has been arriving, or the connection has been idle.
    _since: float
    _arrival: asyncio.TimerHandle | None
    _ip: str | None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._since = time.monotonic()
        self._arrival = None
        peer = transport.get_extra_info("peername")
        self._ip = str(peer[0]) if peer else None
        table = self.table
        if self._ip is not None and not table.exempt(self._ip):
            mine = table.per_ip.setdefault(self._ip, set())
            if len(mine) >= table.bounds.max_per_ip and not self._shed(self._ip):
                self._ip = None
                transport.close()  # this address holds its share already, every one of them busy
                return
            mine.add(self)
        else:
            self._ip = None
        table.open.add(self)
        self._expect_request()
        if len(table.open) > table.bounds.max_connections and not self._shed(None):
            self.transport.close()
            self._forget()

    def data_received(self, data: bytes) -> None:
        if self._arrival is None and self.conn.their_state is h11.IDLE:
            self._expect_request()  # the first byte of a next request on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state not in _ARRIVING:
            self._arrived()

    def connection_lost(self, exc: Exception | None) -> None:
        self._arrived()
        self._forget()
        super().connection_lost(exc)
        # uvicorn cancels its keep-alive timer only on a clean close. A client that resets the connection
        # after its answer (an attacker cut off at once, any client killed) left the timer holding the
        # protocol and the protocol the timer: a cycle of some 40 objects per connection (the request,
        # the h11 state, the transport and socket) that only a full collection frees, and under
        # connection churn those collections took 100-180 ms each, a pause every request waited out.
        if self.timeout_keep_alive_task is not None:
            self.timeout_keep_alive_task.cancel()
            self.timeout_keep_alive_task = None

    def _forget(self) -> None:
        table = self.table
        if self in table.open:
            table.open.discard(self)
            if self._ip is not None and (mine := table.per_ip.get(self._ip)) is not None:
                mine.discard(self)
                if not mine:
                    del table.per_ip[self._ip]

    def _expect_request(self) -> None:
        self._since = time.monotonic()
        self._arrival = self.loop.call_later(self.table.bounds.request_seconds, self._too_slow)

    def _arrived(self) -> None:
        if self._arrival is not None:
            self._arrival.cancel()
            self._arrival = None
            self._since = time.monotonic()

    def _too_slow(self) -> None:
        self._arrival = None
        if self.conn.their_state in _ARRIVING:
            self.transport.close()

    def _evictable(self) -> bool:
        """Not serving anyone: its request still arriving, or idle between requests."""
        return self.conn.their_state in _ARRIVING and self.conn.our_state is not h11.SEND_BODY

    def _shed(self, ip: str | None) -> bool:
        """Close the oldest other connection (of address `ip`, or any) whose request is still arriving
        or that is idle; False when every one is busy."""
        candidates = self.table.open if ip is None else self.table.per_ip.get(ip, set())
        others = [c for c in candidates if c is not self and c._evictable() and not c.transport.is_closing()]
        if not others:
            return False
        # A slow sender goes before an idle kept-alive connection (a client waiting to ask again), and
        # the request that has been arriving longest first: a real client's request, whose head and
        # body are a few microseconds apart, is never the one shed while a slow sender is open (by the
        # connection's age, a kept-alive client caught between its head and body was).
        victim = min(others, key=lambda c: (c._arrival is None, c._since))
        victim.transport.close()
        # Out of the count now, not when the loop next calls connection_lost: a request arriving in
        # between must not see the table full.
        victim._forget()
        victim._arrived()
        return True


def bounded_protocol(bounds: ServerBounds) -> type[BoundedH11Protocol]:
    """A protocol class of its own (its own table of connections) for one server."""
    return type("BoundedH11Protocol", (BoundedH11Protocol,), {"table": _Table(bounds)})


def bounded_config(app: Any, bounds: ServerBounds | None = None, **options: Any) -> uvicorn.Config:
    """A uvicorn.Config serving `app` within `bounds` (the defaults: the exporter's); `options` are passed
    on to uvicorn.Config."""
    bounds = bounds or ServerBounds()
    return uvicorn.Config(
        app,
        http=bounded_protocol(bounds),
        h11_max_incomplete_event_size=bounds.max_head_bytes,
        timeout_keep_alive=bounds.keep_alive_seconds,
        # Requests are bounded by connections (one at a time each), and connections by the caps above;
        # this is uvicorn's backstop, which counts a shed connection until its close is processed: set
        # well past the cap, so that churn at the cap never turns probes to 503.
        limit_concurrency=2 * bounds.max_connections + 16,
        timeout_graceful_shutdown=max(1, round(bounds.graceful_seconds)),
        backlog=ACCEPT_BATCH,
        # asyncio's own loop even where uvloop is installed: the batch above is how many connections
        # asyncio's loop sets up per wake-up; uvloop accepts in C, by rules of its own.
        loop="asyncio",
        **options,
    )


class BoundedServer(uvicorn.Server):
    """A uvicorn.Server whose process is gone `hard_stop_seconds` after the first SIGTERM or SIGINT,
    whatever the graceful stop is still waiting for."""

    def __init__(
        self, config: uvicorn.Config, hard_stop_seconds: float = ServerBounds.hard_stop_seconds
    ) -> None:
        super().__init__(config)
        self.hard_stop_seconds = hard_stop_seconds

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        # asyncio accepts up to `backlog` connections each time the listening socket is ready, and runs
        # every one's setup before the next readiness check: a wave of hundreds of connections (clients
        # cut off and connecting again together) made a request on an open connection wait behind all
        # of them, 30-60 ms. Accepting ACCEPT_BATCH at a time interleaves them with everything else; the
        # kernel's queue of connections waiting to be accepted stays LISTEN_BACKLOG long.
        for server in self.servers:
            for sock in server.sockets:
                with socket.socket(fileno=os.dup(sock.fileno())) as same:
                    same.listen(LISTEN_BACKLOG)
        # The app is built now: what exists lives as long as the process (modules, routes, models, about
        # 80,000 objects). A full collection walks all of them, 45-100 ms on a busy core, a pause every
        # request waits out: connection churn (an attacker's clients cut off and connecting again)
        # triggers one every few seconds. Frozen, they are left out of every collection; refcounting
        # still frees them.
        gc.collect()
        gc.freeze()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            threading.Thread(
                target=_hard_stop, args=(sig, self.hard_stop_seconds), name="hard-stop", daemon=True
            ).start()
        super().handle_exit(sig, frame)


def _hard_stop(sig: int, seconds: float) -> None:
    time.sleep(seconds)
    log.error("still stopping %.1f s after %s: exiting now", seconds, signal.Signals(sig).name)
    logging.shutdown()
    os._exit(128 + sig)


# The exporter's bounds, by name (tests and docs quote them).
REQUEST_ARRIVAL_SECONDS = ServerBounds.request_seconds
MAX_CONNECTIONS = ServerBounds.max_connections
HARD_STOP_SECONDS = ServerBounds.hard_stop_seconds
