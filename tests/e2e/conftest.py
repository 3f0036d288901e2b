"""Start the real `servescope` executable on a free loopback port and stop it afterwards."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

SERVESCOPE = str(Path(sys.executable).with_name("servescope"))


@dataclass
class Served:
    base: str
    process: subprocess.Popen[str]


def start_servescope(*args: str, timeout: float = 15.0) -> Served:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("NODE_NAME", None)
    process = subprocess.Popen(
        [SERVESCOPE, "serve", "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    base = None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        found = re.search(r"serving.* on 127\.0\.0\.1:(\d+)", line)
        if found:
            base = f"http://127.0.0.1:{found.group(1)}"
            break
    if base is None:
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"servescope did not start: {err}")
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/readyz").status_code == 200:
                return Served(base, process)
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    process.kill()
    _, err = process.communicate()  # reaps it and closes its pipes
    raise AssertionError(f"servescope did not become ready: {err}")


def stop(served: Served) -> None:
    served.process.terminate()
    try:
        served.process.wait(10)
    except subprocess.TimeoutExpired:
        served.process.kill()
        served.process.wait()
    for stream in (served.process.stdout, served.process.stderr):  # else left to the GC, with a warning
        if stream is not None:
            stream.close()


@pytest.fixture(scope="session")
def simulated() -> Iterator[Served]:
    served = start_servescope("--simulate", "--seed", "1", "--hostname", "golden-node")
    yield served
    stop(served)


@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed: `make test` installs Debian's prometheus package")
    return path
