"""A server that drops a kept-alive connection as the next scrape goes out costs no scrape.

uvicorn, and so vLLM, closes idle keep-alive connections after 5 s, the default scrape interval: the
close and the next request cross. The server below answers the first request of each connection and
closes the connection, unanswered, on the second: the race, made deterministic.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from servescope.exporter.vllm.scrape import ScrapeError, Scraper
from tests.helpers import SAMPLES, read_request

BODY = (SAMPLES / "vllm-0.32-cpu-idle.txt").read_bytes()


class DropsSecondRequest(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        conn: socket.socket = self.request
        if not read_request(conn):
            return
        self.server.connections += 1  # type: ignore[attr-defined]
        head = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {len(BODY)}\r\n\r\n"
        conn.sendall(head.encode() + BODY)
        read_request(conn)  # the second request on this connection: closed without a byte of answer


class NeverAnswers(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        read_request(self.request)  # and close


def serve(handler: type[socketserver.BaseRequestHandler]) -> Iterator[tuple[str, socketserver.TCPServer]]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.connections = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics", server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def dropping() -> Iterator[tuple[str, socketserver.TCPServer]]:
    yield from serve(DropsSecondRequest)


@pytest.fixture
def silent() -> Iterator[tuple[str, socketserver.TCPServer]]:
    yield from serve(NeverAnswers)


@pytest.mark.e2e
def test_a_dropped_keepalive_connection_is_retried_on_a_new_one(
    dropping: tuple[str, socketserver.TCPServer],
) -> None:
    url, server = dropping
    scraper = Scraper(timeout=10.0)
    try:
        for _ in range(3):
            assert scraper.fetch(url) == BODY.decode()
    finally:
        scraper.close()
    # every fetch after the first met a dropped connection and opened a new one
    assert server.connections == 3  # type: ignore[attr-defined]


@pytest.mark.e2e
def test_a_server_that_never_answers_fails_once_retried(silent: tuple[str, socketserver.TCPServer]) -> None:
    url, _ = silent
    scraper = Scraper(timeout=10.0)
    try:
        with pytest.raises(ScrapeError) as failure:
            scraper.fetch(url)
    finally:
        scraper.close()
    assert failure.value.reason == "connect"
    assert "disconnected" in failure.value.message.lower()
    assert url in failure.value.message
