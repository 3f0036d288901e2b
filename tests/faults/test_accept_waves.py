"""A wave of new connections does not hold up a request on an open one.

Clients cut off together connect again together (the slow-body flood of tests/faults does, hundreds at
once). asyncio accepts up to its backlog argument each time the listening socket is ready and sets
every one of them up before it looks at anything else, so the request of a client already connected
waited behind the whole wave. The bounded server accepts ACCEPT_BATCH at a time and keeps the kernel's
queue LISTEN_BACKLOG long: here the server's loop is held while 300 clients connect and a kept-alive
client asks, and the request is answered having accepted a few batches, not the wave; then every one of
the 300 is accepted too.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

from servescope.core.http_server import ACCEPT_BATCH, BoundedServer, ServerBounds, bounded_config
from tests.support import wait_for

WAVE = 300


class CountingSocket(socket.socket):
    """A listening socket that counts the connections taken from the kernel's queue."""

    accepted = 0

    def accept(self) -> tuple[socket.socket, Any]:
        found = super().accept()
        self.accepted += 1
        return found


class HeldApp:
    """GET /hold blocks the event loop until `release` is set; GET /accepted answers how many connections
    the server had accepted when it ran."""

    def __init__(self, listener: CountingSocket) -> None:
        self.listener, self.held, self.release = listener, threading.Event(), threading.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/hold":
            self.held.set()
            self.release.wait(30)  # blocking on purpose: nothing else runs on the loop meanwhile
        body = str(self.listener.accepted).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", b"%d" % len(body))],
            }
        )
        await send({"type": "http.response.body", "body": body})


@contextlib.contextmanager
def serving() -> Iterator[tuple[HeldApp, int]]:
    listener = CountingSocket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    app = HeldApp(listener)
    bounds = ServerBounds(max_connections=2 * WAVE, max_per_ip=2 * WAVE)
    server = BoundedServer(bounded_config(app, bounds, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        wait_for("the server to start", lambda: server.started, 30, 0.05)
        yield app, listener.getsockname()[1]
    finally:
        app.release.set()
        server.should_exit = True
        thread.join(30)
        listener.close()


def ask(sock: socket.socket, path: str) -> None:
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())


def answer(sock: socket.socket) -> int:
    data = b""
    while b"\r\n\r\n" not in data or not data.split(b"\r\n\r\n", 1)[1]:
        chunk = sock.recv(4096)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    return int(data.split(b"\r\n\r\n", 1)[1])


def test_a_request_on_an_open_connection_is_answered_before_the_wave_is_accepted() -> None:
    with serving() as (app, port):
        kept = socket.create_connection(("127.0.0.1", port), timeout=30)
        ask(kept, "/accepted")
        answer(kept)
        holder = socket.create_connection(("127.0.0.1", port), timeout=30)
        ask(holder, "/hold")
        assert app.held.wait(30), "the hold never started"
        # The loop is held: these complete in the kernel's queue, which must be long enough for them.
        wave = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(WAVE)]
        accepted_before = app.listener.accepted
        ask(kept, "/accepted")
        app.release.set()
        answer(holder)
        accepted_when_answered = answer(kept)
        wait_for(
            "the whole wave to be accepted", lambda: app.listener.accepted >= accepted_before + WAVE, 30, 0.05
        )
        for sock in (kept, holder, *wave):
            sock.close()
    assert accepted_when_answered - accepted_before <= 4 * ACCEPT_BATCH, (
        f"{accepted_when_answered - accepted_before} of {WAVE} waiting connections were accepted first"
    )
