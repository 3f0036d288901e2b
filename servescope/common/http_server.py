"""uvicorn with bounds: each request must arrive in time, connections are capped, a stop is short.

uvicorn has no timeout for a request that is being sent: a client that sends half a request head and
waits holds its connection (and a file descriptor) forever. Here every request, head and body, must
arrive within REQUEST_ARRIVAL_SECONDS of its first byte (or of the connection, for the first one),
else the connection is closed; and past MAX_CONNECTIONS the oldest connection whose request is still
arriving is closed to make room, so a flood of half-sent requests cannot keep probes out.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from types import FrameType
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

REQUEST_ARRIVAL_SECONDS = 5.0
MAX_CONNECTIONS = 512
KEEP_ALIVE_SECONDS = 5
MAX_HEAD_BYTES = 16 * 1024  # request line plus headers; h11 answers 400 past it
GRACEFUL_STOP_SECONDS = 1  # a request still running this long after SIGTERM is cancelled
HARD_STOP_SECONDS = 1.8  # whatever still runs then (a stuck close, a hung peer), the process exits

log = logging.getLogger(__name__)

_ARRIVING = (h11.IDLE, h11.SEND_BODY)


class BoundedH11Protocol(H11Protocol):
    """h11 with a deadline on each request's arrival and a cap that sheds the oldest slow sender."""

    _opened_at: float
    _arrival: asyncio.TimerHandle | None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._opened_at = time.monotonic()
        self._arrival = None
        self._expect_request()
        self._shed_if_over_cap()

    def data_received(self, data: bytes) -> None:
        if self._arrival is None and self.conn.their_state is h11.IDLE:
            self._expect_request()  # the first byte of a next request on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state not in _ARRIVING:
            self._arrived()

    def connection_lost(self, exc: Exception | None) -> None:
        self._arrived()
        super().connection_lost(exc)

    def _expect_request(self) -> None:
        self._arrival = self.loop.call_later(REQUEST_ARRIVAL_SECONDS, self._too_slow)

    def _arrived(self) -> None:
        if self._arrival is not None:
            self._arrival.cancel()
            self._arrival = None

    def _too_slow(self) -> None:
        self._arrival = None
        if self.conn.their_state in _ARRIVING:
            self.transport.close()

    def _shed_if_over_cap(self) -> None:
        if len(self.connections) <= MAX_CONNECTIONS:
            return
        arriving = [
            c
            for c in self.connections
            if isinstance(c, BoundedH11Protocol) and c is not self and c._arrival is not None
        ]
        victim = min(arriving, key=lambda c: c._opened_at, default=self)
        victim.transport.close()
        # Out of the count now, not when the loop next calls connection_lost: a request arriving in
        # between must not see the table full.
        self.connections.discard(victim)


def bounded_config(app: Any, **options: Any) -> uvicorn.Config:
    """A uvicorn.Config serving `app` with the bounds above; `options` are passed on."""
    return uvicorn.Config(
        app,
        http=BoundedH11Protocol,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        # Requests are bounded by connections (one at a time each), and connections by the shedding
        # above; this is the backstop, set just past the cap so a full table never turns probes to 503.
        limit_concurrency=MAX_CONNECTIONS + 1,
        timeout_graceful_shutdown=GRACEFUL_STOP_SECONDS,
        **options,
    )


class BoundedServer(uvicorn.Server):
    """A uvicorn.Server whose process is gone HARD_STOP_SECONDS after the first SIGTERM or SIGINT,
    whatever the graceful stop is still waiting for."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            threading.Thread(target=_hard_stop, args=(sig,), name="hard-stop", daemon=True).start()
        super().handle_exit(sig, frame)


def _hard_stop(sig: int) -> None:
    time.sleep(HARD_STOP_SECONDS)
    log.error("still stopping %.1f s after %s: exiting now", HARD_STOP_SECONDS, signal.Signals(sig).name)
    logging.shutdown()
    os._exit(128 + sig)
