"""A port for a child to listen on, chosen so that the gap between choosing it and the child binding it
is as safe as a port number can be made without handing the socket over.

Asking the kernel for port 0 returns an ephemeral port, from the same range the kernel gives every
outgoing connection its local port: on a busy machine a client elsewhere can take the port in the seconds
before a slow child (Prometheus, a demo's exporter) binds it, and the child fails with "address already
in use". So the port is drawn from below that range, where no outgoing connection lands. Two processes
drawing at once are kept apart by a claim file per port, shared through the temporary folder: a port
claimed in the last few minutes is not handed out again, by this process or any other.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from random import randrange
from time import time

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10000  # below it live the well-known services people run on a workstation
CLAIM_SECONDS = 300.0  # long enough for the slowest child to start and bind
TRIES = 200


def _ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default lower bound


def _claims_folder() -> Path | None:
    """Where claims are kept; None where no folder can be made (the ports are then only test-bound)."""
    folder = Path(tempfile.gettempdir()) / f"servescope-ports-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    return folder


def _claim(folder: Path | None, port: int, now: float) -> bool:
    """Claim `port` for this caller unless another did in the last CLAIM_SECONDS."""
    if folder is None:
        return True
    marker = folder / str(port)
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        try:
            if now - marker.stat().st_mtime < CLAIM_SECONDS:
                return False
            os.utime(marker)  # a stale claim: take it over
        except OSError:
            return False
        return True
    except OSError:
        return True  # no claim can be written (a full disk): the port is still test-bound
    os.close(fd)
    return True


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, outside the kernel's ephemeral range, claimed for this caller."""
    high = _ephemeral_low()
    if high - LOWEST_PORT < 100:  # an unusual range leaves too little room below it: ask the kernel
        with socket.socket() as sock:
            sock.bind((host, 0))
            return int(sock.getsockname()[1])
    folder = _claims_folder()
    for _ in range(TRIES):
        port = randrange(LOWEST_PORT, high)
        if _claim(folder, port, time()) and _bindable(host, port):
            return port
    raise OSError(f"no free port on {host} between {LOWEST_PORT} and {high} after {TRIES} tries")
