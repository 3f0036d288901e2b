"""The real `servescope serve` for the fault matrix: started on a free loopback port, always stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support import SERVESCOPE, STARTUP_S
from tests.support.servers import LISTENING, announced_base


@dataclass
class Exporter:
    base: str
    process: subprocess.Popen[str]
    log: Path

    def get(self, path: str, timeout: float = 5.0) -> httpx.Response:
        return httpx.get(f"{self.base}{path}", timeout=timeout)

    def stop_seconds(self, limit: float = 10.0) -> float:
        """SIGTERM, then the seconds until the process exited (AssertionError past `limit`)."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(limit)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"servescope still running {limit:.0f} s after SIGTERM") from None
        return time.monotonic() - started


@contextlib.contextmanager
def exporter(*args: str, log: Path, env: dict[str, str] | None = None) -> Iterator[Exporter]:
    """`servescope serve --listen 127.0.0.1:0 ARGS`, its log in `log`; killed on the way out."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env.pop("NODE_NAME", None)
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [SERVESCOPE, "serve", "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=full_env,
        )
    try:
        yield Exporter(_base_url(process, log), process, log)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


def _base_url(process: subprocess.Popen[str], log: Path) -> str:
    base = announced_base(process, LISTENING, time.monotonic() + STARTUP_S)
    if base is None:
        raise AssertionError(f"servescope did not start: {log.read_text()[-2000:]}")
    return base


def series(text: str, name: str, **labels: str) -> list[float]:
    """Values of the exposition lines of `name` carrying every one of `labels`."""
    found = []
    for line in text.splitlines():
        if not line.startswith((f"{name}{{", f"{name} ")):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{key}="{val}"' in head for key, val in labels.items()):
            found.append(float(value))
    return found
