"""Scrape cost of /metrics: servescope's pre-rendered bytes vs prometheus_client rendering per request.

The server runs pinned to core 0 and the client to core 1, so "scrapes/s" is what one core serves.
Usage: python bench/scrape.py [--requests N] [--gpus 8 64]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import SERVESCOPE, get, machine, pin, start, time_requests, write


def measure(gpus: int, requests: int, extra: list[str]) -> dict[str, object]:
    ours = start([SERVESCOPE, "serve", "--simulate", "--gpus", str(gpus), "--listen", "127.0.0.1:0", *extra])
    try:
        _, body = get(ours, "/metrics")
        series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
        servescope = time_requests(ours, "/metrics", requests)
    finally:
        ours.stop()
    with tempfile.NamedTemporaryFile("w", suffix=".prom", delete=False) as snapshot:
        snapshot.write(body.decode())
    base = start([sys.executable, str(Path(__file__).with_name("baseline_server.py")), snapshot.name])
    try:
        baseline = time_requests(base, "/metrics", max(requests // 10, 50))
    finally:
        base.stop()
        Path(snapshot.name).unlink()
    return {
        "gpus": gpus,
        "series": series,
        "servescope": servescope,
        "generate_latest": baseline,
        "p50_ratio": baseline["p50_ms"] / servescope["p50_ms"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--gpus", type=int, nargs="+", default=[8, 64])
    parser.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        help="extra `servescope serve` argument, e.g. --serve-arg=--no-dcgm",
    )
    parser.add_argument("--name", default="scrape", help="results file name")
    args = parser.parse_args()
    pin(1)
    rows = [measure(g, args.requests, args.serve_arg) for g in args.gpus]
    lines = [
        "# Scrape benchmark",
        "",
        f"Machine: {machine()}",
        "",
        "| GPUs | series | bytes | servescope p50 ms | p99 ms | scrapes/s | generate_latest p50 ms | p99 ms "
        "| scrapes/s | p50 ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        s, b = r["servescope"], r["generate_latest"]
        assert isinstance(s, dict) and isinstance(b, dict)
        lines.append(
            f"| {r['gpus']} | {r['series']} | {s['bytes']} | {s['p50_ms']:.2f} | {s['p99_ms']:.2f} | "
            f"{s['per_second']:.0f} | {b['p50_ms']:.2f} | {b['p99_ms']:.2f} | {b['per_second']:.0f} | "
            f"{r['p50_ratio']:.1f}x |"
        )
    lines += ["", "Targets: p50 <= 2 ms at 8 GPUs, >= 300 scrapes/s on one core, cost linear in series.", ""]
    write(args.name, {"machine": machine(), "serve_args": args.serve_arg, "rows": rows}, "\n".join(lines))


if __name__ == "__main__":
    main()
