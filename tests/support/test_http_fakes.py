"""A fake's server says nothing when a client leaves before its answer (tests cut clients off on purpose,
and a traceback on stderr lands in whatever captures it then)."""

from __future__ import annotations

import socket
import struct
import time
from urllib.parse import urlsplit

import pytest

from tests.support.http_fakes import QuietHandler, loopback_http
from tests.support.waiting import wait_for

BIG = b"x" * (8 << 20)  # more than the socket buffers hold: the write meets the reset


class Big(QuietHandler):
    served = 0

    def answer(self, method: str) -> None:
        try:
            self.reply(200, BIG, "application/octet-stream")
        finally:
            Big.served += 1


def test_a_client_that_resets_mid_answer_leaves_stderr_empty(capsys: pytest.CaptureFixture[str]) -> None:
    with loopback_http(Big) as url:
        address = urlsplit(url)
        client = socket.create_connection((address.hostname, address.port))
        client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        client.recv(1024)  # the answer has started
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # a reset, not a close
        wait_for("the handler to finish", lambda: Big.served == 1, 10)
        time.sleep(0.2)  # socketserver reports the error after the handler returns
    assert capsys.readouterr().err == ""
