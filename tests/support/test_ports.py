"""free_port: the ports the demo and the tests hand to slow children must not be taken before they bind.

The failure it prevents was seen on a loaded machine: a port picked with bind(0) is an ephemeral port,
which an unrelated outgoing connection took before Alertmanager bound it ("address already in use").
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from random import randrange

import pytest

from servescope.core import ports
from servescope.core.ports import free_port


def _ephemeral_range() -> tuple[int, int]:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


@pytest.fixture
def claims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private claims folder, so that these tests neither see nor leave the suite's claims."""
    monkeypatch.setattr("servescope.core.ports.tempfile.gettempdir", lambda: str(tmp_path))
    return tmp_path


def test_ports_are_outside_the_range_outgoing_connections_take_theirs_from(claims: Path) -> None:
    low, high = _ephemeral_range()
    handed = [free_port() for _ in range(50)]
    assert all(ports.LOWEST_PORT <= port < low or port > high for port in handed), handed


def test_a_port_is_not_handed_out_twice_to_this_or_another_process(claims: Path) -> None:
    script = (
        "import tempfile, sys\n"
        f"tempfile.gettempdir = lambda: {str(claims)!r}\n"
        "from servescope.core.ports import free_port\n"
        "print(' '.join(str(free_port()) for _ in range(300)))\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    mine = [free_port() for _ in range(300)]
    theirs = [int(word) for word in child.communicate(timeout=60)[0].split()]
    assert len(theirs) == 300
    assert len(set(mine) | set(theirs)) == 600


def test_a_port_something_listens_on_is_passed_over(claims: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        taken = listener.getsockname()[1]
        draws = iter([taken])
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: 65535)  # let the draw reach `taken`
        monkeypatch.setattr(
            "servescope.core.ports.randrange", lambda low, high: next(draws, 0) or randrange(low, high)
        )
        assert free_port() != taken


def test_a_stale_claim_is_taken_over(claims: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free now, whatever else this machine runs
    monkeypatch.setattr(ports, "_ephemeral_low", lambda: 65535)
    monkeypatch.setattr("servescope.core.ports.randrange", lambda low, high: port)
    assert free_port() == port
    monkeypatch.setattr("servescope.core.ports.time", lambda: 10**10)  # far past the claim's lifetime
    assert free_port() == port


def test_without_a_folder_for_claims_a_free_port_is_still_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setattr("servescope.core.ports.tempfile.gettempdir", lambda: str(blocked))  # mkdir fails
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # free, as promised
