"""A listening process that counts what reaches it: a TCPStore, an NCCL bootstrap socket, an unrelated
service, or (with --metrics) an engine answering GET /metrics with a captured page.

    python -m tests.k8s.listener --bind ADDR [--port N] [--v6only] [--metrics FILE] --record FILE

Prints `listening on PORT` once bound, then keeps `PORT CONNECTIONS BYTES` in FILE, rewritten (atomically)
at every connection and every read, so a test reads how many connections were accepted and how many
bytes they sent. Started under `exec -a TITLE`, it carries that process title, as setproctitle would.
"""

from __future__ import annotations

import argparse
import socket
import threading
from pathlib import Path

HTTP_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nConnection: close\r\n"


class Counts:
    def __init__(self, record: Path, port: int) -> None:
        self.record, self.port = record, port
        self.connections = self.bytes = 0
        self.lock = threading.Lock()
        self.write()

    def add(self, connections: int = 0, received: int = 0) -> None:
        with self.lock:
            self.connections += connections
            self.bytes += received
            self.write()

    def write(self) -> None:
        part = self.record.with_suffix(".part")
        part.write_text(f"{self.port} {self.connections} {self.bytes}\n")
        part.replace(self.record)


def serve(conn: socket.socket, counts: Counts, page: bytes | None) -> None:
    with conn:
        conn.settimeout(5)
        request = b""
        try:
            while b"\r\n\r\n" not in request:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                counts.add(received=len(chunk))
                request += chunk
            if page is not None:
                conn.sendall(HTTP_HEAD + f"Content-Length: {len(page)}\r\n\r\n".encode() + page)
        except OSError:
            return


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bind", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--v6only", action="store_true")
    parser.add_argument("--metrics", type=Path)
    parser.add_argument("--record", type=Path, required=True)
    args = parser.parse_args()
    family = socket.AF_INET6 if ":" in args.bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1 if args.v6only else 0)
    sock.bind((args.bind, args.port))
    sock.listen(64)
    port = sock.getsockname()[1]
    counts = Counts(args.record, port)
    page = args.metrics.read_bytes() if args.metrics else None
    print(f"listening on {port}", flush=True)
    while True:
        conn, _ = sock.accept()
        counts.add(connections=1)
        threading.Thread(target=serve, args=(conn, counts, page), daemon=True).start()


if __name__ == "__main__":
    main()
