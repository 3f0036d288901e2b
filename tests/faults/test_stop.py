"""SIGTERM stops the exporter by its hard stop in every state: mid-scrape of a hung engine, beside a
stuck `dcgmi` that ignores SIGTERM, both at once (no child left behind), and a shutdown that itself
hangs. HARD_STOP_SECONDS (1.8 s) makes the stop take under 2 s by construction; the bounds asserted here
add what a busy machine may (tests/support/bounds.py) and stay far below the hangs: a 60 s scrape, a
`dcgmi` asleep for 600 s, a close that takes 30 s. The seconds each stop took are printed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servescope.core.http_server import HARD_STOP_SECONDS
from tests.faults.exporter import exporter
from tests.faults.peers import serve, trickling
from tests.support import generous, wait_for

pytestmark = pytest.mark.e2e

STUCK_DCGMI = f"""#!{sys.executable}
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(600)
"""


def descendants(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found |= {int(child), *descendants(int(child))}
    return found


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


@pytest.mark.parametrize("state", ["hung_scrape", "stuck_dcgmi", "both"])
def test_sigterm_stops_the_exporter_whatever_it_waits_on(tmp_path: Path, state: str) -> None:
    dcgmi = tmp_path / "dcgmi"
    dcgmi.write_text(STUCK_DCGMI)
    dcgmi.chmod(0o755)
    with serve(trickling) as slow:
        args = ["--no-nvml", "--no-discovery", "--vllm-interval", "30", "--vllm-timeout", "60"]
        if state != "stuck_dcgmi":
            args += ["--vllm-url", slow.url]
        args += ["--dcgmi", str(dcgmi)] if state != "hung_scrape" else ["--no-dcgm"]
        with exporter(*args, log=tmp_path / "log") as served:
            pid = served.process.pid
            wait_for("the exporter to answer", lambda: served.get("/healthz").status_code == 200, 10, 0.2)
            if state != "stuck_dcgmi":
                wait_for("the scrape to start", lambda: slow.connections[0] > 0, 10, 0.1)
            children = (
                wait_for("the dcgmi child", lambda: descendants(pid), 10, 0.1)
                if state != "hung_scrape"
                else set()
            )
            time.sleep(1.0)  # well inside the scrape and the child's life
            stopped_in = served.stop_seconds(limit=30)
    print(f"{state}: stopped {stopped_in:.2f} s after SIGTERM")
    assert stopped_in < generous(HARD_STOP_SECONDS), f"{state}: SIGTERM took {stopped_in:.2f} s"
    left = [child for child in children if alive(child)]
    for child in left:
        os.kill(child, 9)
    assert not left, f"children {left} outlived the exporter"


STUCK_SHUTDOWN_SERVER = f"""#!{sys.executable}
import contextlib, socket, sys, time
from servescope.core.http_server import BoundedServer, bounded_config

@contextlib.asynccontextmanager
async def lifespan(app):
    yield
    time.sleep(30)  # a close that never returns in time

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        async with lifespan(app):
            while (await receive())["type"] != "lifespan.shutdown":
                await send({{"type": "lifespan.startup.complete"}})
        await send({{"type": "lifespan.shutdown.complete"}})

sock = socket.socket()
sock.bind(("127.0.0.1", 0))
print(sock.getsockname()[1], flush=True)
BoundedServer(bounded_config(app, lifespan="on", log_level="error")).run(sockets=[sock])
"""


def test_a_stop_stuck_in_shutdown_is_cut_by_the_hard_stop(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(STUCK_SHUTDOWN_SERVER)
    process = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip().isdigit()
        time.sleep(0.5)  # the lifespan has started
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(30)
        took = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    _, err = process.communicate()
    print(f"stuck shutdown: exited {code} {took:.2f} s after SIGTERM")
    assert code == 128 + signal.SIGTERM, err
    assert HARD_STOP_SECONDS - 0.2 <= took < generous(HARD_STOP_SECONDS)
    assert "exiting now" in err
