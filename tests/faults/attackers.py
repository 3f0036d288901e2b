"""Hostile answers and clients of the attack tests: compression bombs that decode to 1 GiB, and slow-body
clients that reconnect whenever they are cut off (the trickling peers are runbook_peers.hostile_peer's)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.process
import selectors
import socket
import threading
import time
import zlib
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import brotli

GIB = 2**30
_ZEROS = bytes(2**20)


def gzip_bomb_nested() -> bytes:
    """gzip(gzip(1 GiB of zeros)): the inner stream is 1024 gzip members of 1 MiB of zeros each (valid
    gzip, made in a blink), the outer one compresses that again; about 2 KB on the wire."""
    member = zlib.compressobj(9, zlib.DEFLATED, 31)
    one = member.compress(_ZEROS) + member.flush()
    outer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return outer.compress(one * 1024) + outer.flush()


def brotli_bomb() -> bytes:
    """brotli(1 GiB of zeros), about 200 KB."""
    compressor = brotli.Compressor(quality=1)
    parts = [compressor.process(_ZEROS) for _ in range(1024)]
    return b"".join([*parts, compressor.finish()])


def answer_with(body: bytes, encoding: str) -> bytes:
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: {encoding}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


@dataclass
class SlowBodies:
    """`count` clients spread over source addresses, each sending a whole request head (a webhook post
    announcing a 1000-byte body) and then one body byte every `every` seconds; a client cut off connects
    again half a second later. Counts how often they were cut off."""

    port: int
    count: int
    sources: list[str]
    every: float = 2.0
    reconnects: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _process: multiprocessing.process.BaseProcess | None = None
    _counter: Any = None
    _pending: list[tuple[float, int]] = field(default_factory=list)

    HEAD = (
        b"POST /alertmanager/webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n"
    )

    def start(self) -> SlowBodies:
        """The clients in a process of their own: their loop never shares a GIL with the probes. Spawned,
        not forked: a test process has threads, and a fork copies whatever locks they held."""
        spawn = multiprocessing.get_context("spawn")
        self._counter = spawn.Value("i", 0)
        args = (self.port, self.count, self.sources, self.every, self._counter)
        self._process = spawn.Process(target=_attack, args=args, daemon=True)
        self._process.start()
        return self

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.join(10)
            self.reconnects = int(self._counter.value)

    def _publish(self) -> None:
        while True:
            self._counter.value = self.reconnects
            time.sleep(0.2)

    def _connect(self, selector: selectors.BaseSelector, index: int, delay: float = 0.0) -> None:
        sock = socket.socket()
        sock.bind((self.sources[index % len(self.sources)], 0))
        sock.setblocking(False)
        with suppress(BlockingIOError):
            sock.connect(("127.0.0.1", self.port))
        selector.register(sock, selectors.EVENT_READ, [index, time.monotonic() + delay, False])

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        for index in range(self.count):
            self._connect(selector, index)
        while not self._stop.is_set():
            now = time.monotonic()
            for due, index in [p for p in self._pending if p[0] <= now]:
                self._pending.remove((due, index))
                self._connect(selector, index)
            for key, _ in selector.select(0.1):  # readable: an answer or a close; either way, cut off
                self._cut(selector, key.fileobj, key.data[0])  # type: ignore[arg-type]
            now = time.monotonic()
            for key in list(selector.get_map().values()):
                index, due, sent_head = key.data
                if now < due:
                    continue
                try:
                    key.fileobj.send(b"{" if sent_head else self.HEAD)  # type: ignore[union-attr]
                except OSError:
                    self._cut(selector, key.fileobj, index)  # type: ignore[arg-type]
                    continue
                key.data[1], key.data[2] = now + self.every, True
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        selector.close()

    def _cut(self, selector: selectors.BaseSelector, sock: socket.socket, index: int) -> None:
        selector.unregister(sock)
        sock.close()
        self.reconnects += 1
        self._pending.append((time.monotonic() + 0.5, index))  # connects again half a second later


def _attack(port: int, count: int, sources: list[str], every: float, counter: Any) -> None:
    """The spawned process: the clients' loop, publishing how often they were cut off."""
    clients = SlowBodies(port, count, sources, every)
    clients._counter = counter
    threading.Thread(target=clients._publish, daemon=True).start()
    clients._run()
