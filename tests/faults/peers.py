"""Hostile and healthy peers for the fault matrix: real HTTP servers on 127.0.0.1, each stoppable.

Every peer serves from its own thread; leaving the `serve` context stops the server, wakes the
handlers that pace their bytes, and closes every socket, also when the test failed.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import socketserver
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import SAMPLES, read_request

GOOD = (SAMPLES / "vllm-0.32-cpu-idle.txt").read_bytes()
Handler = Callable[[socket.socket, threading.Event], None]


def healthy(conn: socket.socket, _: threading.Event) -> None:
    """A real engine's page, whole, then the connection closes."""
    if read_request(conn):
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {len(GOOD)}\r\n"
        )
        conn.sendall(head.encode() + b"Connection: close\r\n\r\n" + GOOD)


def trickling(conn: socket.socket, stop: threading.Event) -> None:
    """One byte every 1.5 s, starting with the status line: no per-read timeout ever fires."""
    if not read_request(conn):
        return
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + GOOD
    for byte in answer:
        if stop.wait(1.5):
            return
        conn.sendall(bytes([byte]))


def _endless(
    conn: socket.socket, stop: threading.Event, head: bytes, frame: Callable[[bytes], bytes]
) -> None:
    if not read_request(conn):
        return
    line = b"# padding " + b"x" * 1000 + b"\n"
    block = frame(line * 64)
    conn.sendall(head)
    while not stop.is_set():
        conn.sendall(block)


def no_length(conn: socket.socket, stop: threading.Event) -> None:
    """A body with neither Content-Length nor chunking, never ending."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
    _endless(conn, stop, head, lambda data: data)


def endless_chunked(conn: socket.socket, stop: threading.Event) -> None:
    """A chunked body whose last chunk never comes."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
    _endless(conn, stop, head, lambda data: b"%x\r\n%s\r\n" % (len(data), data))


@functools.cache
def _bomb() -> bytes:
    """About 250 KB on the wire, 256 MiB inflated (made once, on first use)."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1024 * 1024)
    return b"".join(squeeze.compress(zeros) for _ in range(256)) + squeeze.flush()


def gzip_bomb(conn: socket.socket, _: threading.Event) -> None:
    """A small gzip body that inflates to 256 MiB, its Content-Length the compressed size."""
    if read_request(conn):
        bomb = _bomb()
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\n"
            f"Content-Length: {len(bomb)}\r\nConnection: close\r\n\r\n"
        )
        conn.sendall(head.encode() + bomb)


def _largest_page(size: int) -> bytes:
    lines = [
        GOOD.rstrip(b"\n"),
        b"# HELP vllm:adapter_requests Requests per adapter.",
        b"# TYPE vllm:adapter_requests gauge",
    ]
    total, index = sum(len(line) + 1 for line in lines), 0
    while True:
        line = b'vllm:adapter_requests{model_name="tiny-llm",lora="adapter-%08d"} %d' % (index, index)
        if total + len(line) + 1 > size:
            return b"\n".join(lines) + b"\n"
        lines.append(line)
        total += len(line) + 1
        index += 1


def largest_page(size: int) -> Handler:
    """A valid engine page of just under `size` bytes: the largest one the exporter accepts and parses."""
    page = _largest_page(size)

    def handler(conn: socket.socket, _: threading.Event) -> None:
        if read_request(conn):
            head = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {len(page)}\r\n"
            conn.sendall(head.encode() + b"Connection: close\r\n\r\n" + page)

    return handler


@dataclass
class Peer:
    url: str
    connections: list[int] = field(default_factory=lambda: [0])


@contextlib.contextmanager
def serve(handler: Handler) -> Iterator[Peer]:
    """Run `handler` for every connection to a new loopback port; `Peer.url` is its /metrics."""
    stop = threading.Event()
    peer = Peer("")

    class _Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            peer.connections[0] += 1
            with contextlib.suppress(OSError):
                handler(self.request, stop)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    peer.url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield peer
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def rss_peak_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM), in MiB."""
    return _status_kib(pid, "VmHWM") / 1024


def rss_mib(pid: int) -> float:
    return _status_kib(pid, "VmRSS") / 1024


def _status_kib(pid: int, key: str) -> int:
    with Path(f"/proc/{pid}/status").open(encoding="ascii") as status:
        for line in status:
            if line.startswith(f"{key}:"):
                return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/status has no {key}")


def open_fds(pid: int) -> int:
    return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())
