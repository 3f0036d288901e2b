"""Scrape cost of /metrics: servescope's pre-rendered bytes vs prometheus_client rendering per request.

The matrix is GPUs x simulated vLLM engines passed through (`--passthrough`, asked for), every GPU with
18 NVLinks and DCGM streaming from the fake dcgmi. The exporter (and the engines and dcgmi it starts,
which inherit its affinity) runs pinned to core 0 and the client to core 1, so "scrapes/s" is what one
core serves while the stand-ins for the GPU and vLLM share it.

An engine serves a group of at least one GPU, so the exporter caps engines at the GPU count: the
8 GPUs x 16 engines cell runs 8 engines of one GPU each. The cell is kept (the densest layout 8 GPUs
allow) and its row shows the engines requested and the engines that ran.

The baseline is the same bytes, captured once the cell has settled, served by prometheus_client's
`generate_latest` behind the same uvicorn stack. When Debian's `prometheus-node-exporter` (or
`node_exporter`) is on PATH, it runs on the same core with its default collectors as a reference point:
its p50 per exposed line next to ours.
Usage: python bench/scrape.py [--gpus 8 16 64] [--engines 0 4 16] [--seconds 3] [--baseline-seconds 4]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script: the root, for `bench`
from bench.common import SERVESCOPE, Server, get, machine, pin, start, time_requests, write
from servescope.core.processes import free_port

SERVER_CORE = 0
CLIENT_CORE = 1
SOURCE_UP = re.compile(r'^servescope_source_up\{source="(\w+)"(?:,endpoint="([^"]*)")?\} (\S+)$', re.M)


def series_count(body: bytes) -> int:
    return sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))


def sources_up(body: bytes) -> tuple[set[str], int]:
    """Sources reporting up, and how many vLLM endpoints are up."""
    up, endpoints = set(), 0
    for source, endpoint, value in SOURCE_UP.findall(body.decode()):
        if value != "1":
            continue
        if endpoint:
            endpoints += 1
        else:
            up.add(source)
    return up, endpoints


def settle(server: Server, engines: int, dcgm: bool, timeout: float = 90.0) -> tuple[bytes, bool]:
    """Wait until every engine is joined, DCGM is up and the series count has held for 2 s.

    Discovery finds engines after they start, and DCGM's profiling fields turn from N/A to values after
    a row or two: timing earlier would measure a smaller exposition than the cell's.
    """
    deadline = time.monotonic() + timeout
    counts: list[int] = []
    body = b""
    while time.monotonic() < deadline:
        _, body = get(server, "/metrics")
        up, endpoints = sources_up(body)
        if endpoints >= engines and (not dcgm or "dcgm" in up):
            counts.append(series_count(body))
            if len(counts) >= 3 and len(set(counts[-3:])) == 1:
                return body, True
        time.sleep(1.0)
    return body, False


def measure(gpus: int, engines: int, args: argparse.Namespace) -> dict[str, object]:
    argv = [SERVESCOPE, "serve", "--simulate", "--gpus", str(gpus), "--nvlinks", str(args.nvlinks)]
    argv += ["--engines", str(engines), "--passthrough", "--listen", "127.0.0.1:0", *args.serve_arg]
    expected = min(engines, gpus)  # the exporter's own cap: one GPU at least per engine
    dcgm = "--no-dcgm" not in args.serve_arg
    began = time.monotonic()
    ours = start(argv, core=SERVER_CORE)
    try:
        body, settled = settle(ours, expected, dcgm)
        startup = time.monotonic() - began
        _, running = sources_up(body)
        servescope = time_requests(ours, "/metrics", 100_000, warmup=50, seconds=args.seconds)
    finally:
        ours.stop()
    with tempfile.TemporaryDirectory() as folder:
        snapshot = Path(folder) / "metrics.prom"
        snapshot.write_bytes(body)
        base = start([sys.executable, str(Path(__file__).with_name("baseline_server.py")), str(snapshot)])
        try:
            baseline = time_requests(base, "/metrics", 100_000, warmup=2, seconds=args.baseline_seconds)
        finally:
            base.stop()
    series = series_count(body)
    return {
        "gpus": gpus,
        "nvlinks": args.nvlinks,
        "engines_requested": engines,
        "engines_running": running,
        "settled": settled,
        "startup_seconds": round(startup, 1),
        "series": series,
        "servescope": servescope,
        "servescope_us_per_line": servescope["p50_ms"] * 1000 / series,
        "generate_latest": baseline,
        "p50_ratio": baseline["p50_ms"] / servescope["p50_ms"],
    }


def node_exporter_binary() -> str | None:
    return shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")


def node_exporter_reference(seconds: float) -> dict[str, object]:
    """p50 of node_exporter's /metrics with its default collectors, per exposed line."""
    binary = node_exporter_binary()
    if binary is None:
        return {"installed": False}
    port = free_port()
    one_core = {SERVER_CORE} if (os.cpu_count() or 1) > 1 else None
    process = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        # Pinned before exec, so the Go runtime sizes GOMAXPROCS to the one core it may use.
        preexec_fn=(lambda: os.sched_setaffinity(0, one_core)) if one_core else None,  # noqa: PLW1509
    )
    server = Server(process, "127.0.0.1", port)
    try:
        body = b""
        for _ in range(100):
            try:
                status, body = get(server, "/metrics")
                if status == 200:
                    break
            except OSError:
                time.sleep(0.1)
        else:
            return {"installed": True, "binary": binary, "error": "did not answer on /metrics"}
        timing = time_requests(server, "/metrics", 100_000, warmup=10, seconds=seconds)
    finally:
        server.stop()
    lines = series_count(body)
    return {
        "installed": True,
        "binary": binary,
        "series": lines,
        "timing": timing,
        "us_per_line": timing["p50_ms"] * 1000 / lines,
    }


def markdown(rows: list[dict[str, object]], reference: dict[str, object], args: argparse.Namespace) -> str:
    lines = [
        "# Scrape benchmark",
        "",
        f"Machine: {machine()}",
        "",
        f"Every GPU with {args.nvlinks} NVLinks, DCGM streaming, engines' series passed through; "
        f"servescope timed for {args.seconds:g} s per cell, generate_latest for {args.baseline_seconds:g} s.",
        "",
        "| GPUs | engines (ran) | series | bytes | servescope p50 ms | p99 ms | scrapes/s | µs/line "
        "| generate_latest p50 ms | p99 ms | scrapes/s | p50 ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        s, b = r["servescope"], r["generate_latest"]
        assert isinstance(s, dict) and isinstance(b, dict)
        engines = f"{r['engines_requested']} ({r['engines_running']})"
        lines.append(
            f"| {r['gpus']} | {engines} | {r['series']} | {s['bytes']} | {s['p50_ms']:.2f} | "
            f"{s['p99_ms']:.2f} | {s['per_second']:.0f} | {r['servescope_us_per_line']:.3f} | "
            f"{b['p50_ms']:.2f} | {b['p99_ms']:.2f} | {b['per_second']:.1f} | {r['p50_ratio']:.0f}x |"
        )
    lines.append("")
    if reference.get("installed") and "timing" in reference:
        timing = reference["timing"]
        assert isinstance(timing, dict)
        lines.append(
            f"Reference: {reference['binary']} (default collectors), {reference['series']} series, "
            f"p50 {timing['p50_ms']:.2f} ms = {reference['us_per_line']:.3f} µs per line."
        )
    else:
        lines.append(f"Reference: prometheus-node-exporter {reference.get('error', 'not installed')}.")
    lines += ["", "Targets: p50 <= 2 ms at 8 GPUs, <= 10 ms at 64 GPUs + 16 engines.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpus", type=int, nargs="+", default=[8, 16, 64])
    parser.add_argument("--engines", type=int, nargs="+", default=[0, 4, 16])
    parser.add_argument("--nvlinks", type=int, default=18)
    parser.add_argument("--seconds", type=float, default=3.0, help="servescope timing per cell")
    parser.add_argument("--baseline-seconds", type=float, default=4.0, help="generate_latest timing per cell")
    parser.add_argument("--reference-seconds", type=float, default=3.0, help="node_exporter timing")
    parser.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        help="extra `servescope serve` argument, e.g. --serve-arg=--no-dcgm",
    )
    parser.add_argument("--name", default="scrape", help="results file name")
    args = parser.parse_args()
    pin(CLIENT_CORE)
    rows = []
    for gpus in args.gpus:
        for engines in args.engines:
            rows.append(measure(gpus, engines, args))
            print(f"scrape: {gpus} GPUs, {engines} engines done", file=sys.stderr, flush=True)
    reference = node_exporter_reference(args.reference_seconds)
    data: dict[str, object] = {
        "machine": machine(),
        "serve_args": args.serve_arg,
        "seconds_per_cell": args.seconds,
        "baseline_seconds_per_cell": args.baseline_seconds,
        "rows": rows,
        "node_exporter": reference,
    }
    write(args.name, data, markdown(rows, reference, args))


if __name__ == "__main__":
    main()
