"""The sources' bounded GET: gzip inflated only up to the cap, one large body at a time."""

from __future__ import annotations

import gzip
import socket
import threading
import time
import tracemalloc

import pytest

from servescope.exporter.sources.base import SourceError
from servescope.exporter.sources.bounded_http import LARGE_BODIES, SMALL_BODY_BYTES, BoundedClient
from tests.faults.peers import GOOD, Handler, gzip_bomb, largest_page, serve
from tests.helpers import read_request
from tests.support import generous

pytestmark = pytest.mark.e2e
CAP = 4 * 1024 * 1024


def sends(body: bytes, encoding: str) -> Handler:
    def handler(conn: socket.socket, _: threading.Event) -> None:
        if read_request(conn):
            head = f"HTTP/1.1 200 OK\r\nContent-Encoding: {encoding}\r\nContent-Length: {len(body)}\r\n\r\n"
            conn.sendall(head.encode() + body)

    return handler


def test_a_gzip_bomb_is_refused_without_inflating_past_the_cap() -> None:
    # tracemalloc slows every allocation, and a busy machine more: a long deadline, so that the bomb is
    # refused for its size, which is the subject, never for the time inflating took.
    client = BoundedClient(timeout=60, max_bytes=CAP)
    with serve(gzip_bomb) as bomb:
        tracemalloc.start()
        try:
            with pytest.raises(SourceError) as refused:
                client.get(bomb.url)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            client.close()
    assert refused.value.reason == "too_large"
    assert peak < 3 * CAP, f"{peak / 2**20:.0f} MiB allocated for a {CAP / 2**20:.0f} MiB cap"


@pytest.mark.parametrize(
    ("body", "reason"), [(gzip.compress(GOOD), None), (gzip.compress(GOOD)[:-200], "parse"), (GOOD, "parse")]
)
def test_gzip_bodies_are_inflated_and_broken_ones_named(body: bytes, reason: str | None) -> None:
    client = BoundedClient(timeout=5, max_bytes=CAP)
    with serve(sends(body, "gzip")) as peer:
        try:
            if reason is None:
                assert bytes(client.get(peer.url)) == GOOD
            else:
                with pytest.raises(SourceError) as failure:
                    client.get(peer.url)
                assert failure.value.reason == reason
        finally:
            client.close()


def test_a_large_body_waits_for_the_slot_within_its_deadline_and_gets_it_once_free() -> None:
    holding, release = threading.Event(), threading.Event()

    def hold_the_slot() -> None:
        with LARGE_BODIES.hold():
            client = BoundedClient(timeout=5, max_bytes=CAP)
            with serve(largest_page(SMALL_BODY_BYTES * 2)) as first:
                client.get(first.url)  # past SMALL_BODY_BYTES: takes the slot, kept until hold() ends
            client.close()
            holding.set()
            release.wait(120)

    holder = threading.Thread(target=hold_the_slot, daemon=True)
    holder.start()
    client = BoundedClient(timeout=0.5, max_bytes=CAP)
    try:
        assert holding.wait(generous(10))
        with serve(largest_page(SMALL_BODY_BYTES * 2)) as second:
            started = time.monotonic()
            with pytest.raises(SourceError) as waited:
                client.get(second.url)
            # Ends at its own deadline, not when the slot is freed (two minutes on).
            assert waited.value.reason == "timeout" and time.monotonic() - started < generous(0.5)
            release.set()
            holder.join(generous(5))
            # Once free, the slot is given; a deadline a busy machine keeps, the subject being the slot.
            after = BoundedClient(timeout=generous(0.5), max_bytes=CAP)
            try:
                assert len(after.get(second.url)) > SMALL_BODY_BYTES
            finally:
                after.close()
    finally:
        release.set()
        client.close()
