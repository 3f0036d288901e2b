"""M5 (exporter): half-sent requests are cut off, connections capped; /healthz keeps answering beside
them (how fast is printed: bench/ measures speed, not tests)."""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from servescope.core.http_server import HARD_STOP_SECONDS, MAX_CONNECTIONS, REQUEST_ARRIVAL_SECONDS
from tests.faults.exporter import exporter
from tests.faults.peers import open_fds, rss_peak_mib
from tests.support import generous, wait_for

pytestmark = pytest.mark.e2e

HALF_SENT = MAX_CONNECTIONS + 100  # past the cap: the oldest half-sent ones make room


@contextlib.contextmanager
def half_sent(port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections that each send part of a request head and then wait."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            conn = socket.create_connection(("127.0.0.1", port), timeout=5)
            conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            sockets.append(conn)
        yield sockets
    finally:
        for conn in sockets:
            conn.close()


def closed_by_peer(conn: socket.socket) -> bool:
    conn.settimeout(0.01)
    try:
        return conn.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def closed_count(sockets: list[socket.socket]) -> int:
    """How many of `sockets` the peer has closed (readable at once: end of file, or reset)."""
    poller = select.poll()
    for conn in sockets:
        poller.register(conn, select.POLLIN)
    return len(poller.poll(0))


def healthz_seconds(base: str, times: int) -> list[float]:
    took = []
    for _ in range(times):
        started = time.monotonic()
        assert httpx.get(f"{base}/healthz", timeout=generous(5)).status_code == 200
        took.append(time.monotonic() - started)
    return took


def test_half_sent_requests_are_cut_off_and_healthz_keeps_answering(tmp_path: Path) -> None:
    with exporter("--no-nvml", "--no-dcgm", "--no-discovery", log=tmp_path / "log") as served:
        pid, port = served.process.pid, int(served.base.rsplit(":", 1)[1])
        healthz_seconds(served.base, 1)
        idle_fds = open_fds(pid)
        with half_sent(port, HALF_SENT) as sockets:
            time.sleep(0.5)
            under_load = healthz_seconds(served.base, 1)
            # Answered while the half-sent connections were still held: the server made room by
            # shedding the oldest; it did not wait for the arrival deadline to cut them all.
            held = HALF_SENT - closed_count(sockets)
            under_load += healthz_seconds(served.base, 19)
            fds = open_fds(pid)
            wait_for(
                f"every one of the {HALF_SENT} half-sent connections to be cut",
                lambda: closed_count(sockets) == HALF_SENT,
                generous(REQUEST_ARRIVAL_SECONDS),
                every=0.5,
            )
            after = open_fds(pid)
        peak = rss_peak_mib(pid)
        stopped_in = served.stop_seconds()
    median = sorted(under_load)[len(under_load) // 2]
    slowest = max(under_load)
    print(f"/healthz, {HALF_SENT} half-sent: median {median * 1000:.0f} ms, max {slowest * 1000:.0f} ms")
    print(f"exporter fds {idle_fds} idle, {fds} under load, {after} after; RSS peak {peak:.0f} MiB")
    assert held >= MAX_CONNECTIONS // 2, f"/healthz answered once only {held} half-sent connections were held"
    # The cap, plus a few the loop holds while a shed connection closes.
    assert fds <= idle_fds + MAX_CONNECTIONS + 8, f"{fds} fds open with {HALF_SENT} connections"
    assert after <= idle_fds + 2
    assert peak < 150
    # Past HARD_STOP_SECONDS the process exits whatever still runs; the bound is that plus a busy machine.
    assert stopped_in < generous(HARD_STOP_SECONDS)


def test_a_request_dripped_byte_by_byte_is_cut_at_the_arrival_deadline(tmp_path: Path) -> None:
    with exporter("--no-nvml", "--no-dcgm", "--no-discovery", log=tmp_path / "log") as served:
        port = int(served.base.rsplit(":", 1)[1])
        request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 80  # 30 s at 4 bytes/s
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            started = time.monotonic()
            for byte in request:
                if closed_by_peer(conn):
                    break
                with contextlib.suppress(OSError):
                    conn.sendall(bytes([byte]))
                time.sleep(0.25)
            took = time.monotonic() - started
            assert closed_by_peer(conn), "a request dripped for 30 s was never cut off"
    print(f"a dripped request was cut after {took:.1f} s")
    # Cut at the arrival deadline, long before the whole request would have arrived.
    assert took < generous(REQUEST_ARRIVAL_SECONDS), f"cut after {took:.1f} s"
