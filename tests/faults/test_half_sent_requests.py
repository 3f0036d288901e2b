"""M5 (exporter): half-sent requests are cut off, connections capped; /healthz keeps answering fast."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from servescope.common.http_server import MAX_CONNECTIONS, REQUEST_ARRIVAL_SECONDS
from tests.faults.exporter import exporter
from tests.faults.peers import open_fds, rss_peak_mib

pytestmark = pytest.mark.e2e

HALF_SENT = MAX_CONNECTIONS + 100  # past the cap: the oldest half-sent ones make room
HEALTHZ_BOUND_SECONDS = 0.25  # < 100 ms on an idle machine; lenient for a shared 2-core one


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


def healthz_seconds(base: str, times: int) -> list[float]:
    took = []
    for _ in range(times):
        started = time.monotonic()
        assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
        took.append(time.monotonic() - started)
    return took


def test_half_sent_requests_are_cut_off_and_healthz_stays_fast(tmp_path: Path) -> None:
    with exporter("--no-nvml", "--no-dcgm", "--no-discovery", log=tmp_path / "log") as served:
        pid, port = served.process.pid, int(served.base.rsplit(":", 1)[1])
        healthz_seconds(served.base, 1)
        idle_fds = open_fds(pid)
        with half_sent(port, HALF_SENT) as sockets:
            time.sleep(0.5)
            under_load = healthz_seconds(served.base, 20)
            fds = open_fds(pid)
            time.sleep(REQUEST_ARRIVAL_SECONDS + 1.5)
            cut = sum(closed_by_peer(conn) for conn in sockets)
            after = open_fds(pid)
        peak = rss_peak_mib(pid)
        stopped_in = served.stop_seconds()
    median = sorted(under_load)[len(under_load) // 2]
    slowest = max(under_load)
    print(f"/healthz, {HALF_SENT} half-sent: median {median * 1000:.0f} ms, max {slowest * 1000:.0f} ms")
    print(f"exporter fds {idle_fds} idle, {fds} under load, {after} after; RSS peak {peak:.0f} MiB")
    assert max(under_load) < HEALTHZ_BOUND_SECONDS
    # The cap, plus a few the loop holds while a shed connection closes.
    assert fds <= idle_fds + MAX_CONNECTIONS + 8, f"{fds} fds open with {HALF_SENT} connections"
    assert cut == HALF_SENT, f"{HALF_SENT - cut} half-sent connections still open"
    assert after <= idle_fds + 2
    assert peak < 150
    assert stopped_in < 2.0


def test_a_request_dripped_byte_by_byte_is_cut_at_the_arrival_deadline(tmp_path: Path) -> None:
    with exporter("--no-nvml", "--no-dcgm", "--no-discovery", log=tmp_path / "log") as served:
        port = int(served.base.rsplit(":", 1)[1])
        request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 20  # 15 s at 4 bytes/s
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            started = time.monotonic()
            for byte in request:
                if closed_by_peer(conn):
                    break
                with contextlib.suppress(OSError):
                    conn.sendall(bytes([byte]))
                time.sleep(0.25)
            took = time.monotonic() - started
            assert closed_by_peer(conn), "a request dripped for 15 s was never cut off"
    print(f"a dripped request was cut after {took:.1f} s")
    assert took < REQUEST_ARRIVAL_SECONDS + 2, f"cut after {took:.1f} s"
