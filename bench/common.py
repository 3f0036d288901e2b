"""Helpers shared by the benchmarks: start the exporter pinned to a core, time HTTP requests."""

from __future__ import annotations

import datetime
import http.client
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servescope.core.processes import Child, ChildFailedError, stop_process

# Smoke runs point this elsewhere so that they never overwrite the committed results.
RESULTS = Path(os.environ.get("SERVESCOPE_BENCH_RESULTS", Path(__file__).parent / "results"))
SERVESCOPE = str(Path(sys.executable).with_name("servescope"))
TICKS = os.sysconf("SC_CLK_TCK")
_IMPORTED = time.monotonic()


def own_wall_seconds() -> float:
    """Seconds since this process started, interpreter start-up included (the report sums them)."""
    try:
        started_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        elapsed = uptime - started_ticks / TICKS
        if elapsed >= 0:
            return elapsed
    except (OSError, ValueError, IndexError):
        pass
    return time.monotonic() - _IMPORTED  # not Linux: from the import of this module


def pin(core: int | None) -> None:
    """Pin the calling process to one CPU core when the machine has more than one."""
    if core is not None and hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {core})


@dataclass
class Server:
    process: subprocess.Popen[Any]
    host: str
    port: int
    group: bool = False  # started in its own session (a Child): stopped with its whole process group

    def stop(self) -> None:
        stop_process(self.process, grace=10.0, group=self.group)


def start(argv: list[str], core: int | None = 0, ready_path: str = "/readyz") -> Server:
    """Start a server that prints `... on HOST:PORT` when it listens, and wait until it is ready."""
    child = Child(Path(argv[0]).name, argv, Path(tempfile.mkdtemp(prefix="bench-")) / "server.log")
    child.start()
    assert child.process is not None
    if core is not None and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(child.process.pid, {core})  # before it has started serving
    try:
        found = child.wait_for_output(r" on (\S+):(\d+)", 30)
        child.wait_ready(f"http://{found.group(1)}:{found.group(2)}{ready_path}", 30)
    except ChildFailedError as exc:
        child.stop()
        raise RuntimeError(f"server did not start: {exc}") from None
    return Server(child.process, found.group(1), int(found.group(2)), group=True)


def get(server: Server, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def time_requests(
    server: Server,
    path: str,
    count: int,
    warmup: int = 100,
    *,
    seconds: float | None = None,
    minimum: int = 5,
) -> dict[str, float]:
    """Sequential keep-alive GETs from one client: latency percentiles and requests per second.

    With `seconds`, timing stops after that long (but not before `minimum` requests), so a slow
    baseline cannot stretch a benchmark run past its budget.
    """
    conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
    latencies: list[float] = []
    size = 0
    deadline = math.inf
    try:
        for i in range(warmup + count):
            if i == warmup and seconds is not None:
                deadline = time.perf_counter() + seconds
            if len(latencies) >= minimum and time.perf_counter() >= deadline:
                break
            started = time.perf_counter()
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read()
            elapsed = time.perf_counter() - started
            if response.status != 200:
                raise RuntimeError(f"GET {path}: HTTP {response.status}")
            if i >= warmup:
                latencies.append(elapsed)
                size = len(body)
    finally:
        conn.close()
    return _latency_summary(latencies, size)


def _latency_summary(latencies: list[float], size: int) -> dict[str, float]:
    latencies = sorted(latencies)
    return {
        "p50_ms": statistics.median(latencies) * 1000,
        # Nearest rank: with fewer than 100 requests the p99 is the slowest one.
        "p99_ms": latencies[math.ceil(len(latencies) * 0.99) - 1] * 1000,
        "per_second": len(latencies) / sum(latencies),
        "requests": len(latencies),
        "bytes": size,
    }


def machine() -> dict[str, object]:
    model = "unknown"
    memory_gib = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gib = round(int(line.split()[1]) / 2**20, 1)
                break
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gib": memory_gib,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "platform": platform.platform(),
    }


def write(name: str, data: dict[str, object], markdown: str) -> None:
    """Write results/NAME.json and .md; the JSON also records when it finished and how long it ran."""
    data.setdefault("wall_seconds", round(own_wall_seconds(), 1))
    data.setdefault("finished_at", datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown)
    print(markdown)
