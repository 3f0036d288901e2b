"""Footprint of `servescope serve --simulate`: RSS and CPU over a soak at the default 1 s NVML interval.

A scraper fetches /metrics every 15 s, as Prometheus would. RSS is sampled every 5 s; the slope is a
least-squares fit between minute 2 and the end, so start-up allocation does not count as growth.
Usage: python bench/footprint.py [--minutes 10] [--gpus 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import SERVESCOPE, get, machine, start, write

TICKS = os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def slope(points: list[tuple[float, float]]) -> float:
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    num = sum((t - mean_t) * (v - mean_v) for t, v in points)
    den = sum((t - mean_t) ** 2 for t, _ in points)
    return num / den if den else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--gpus", type=int, default=8)
    args = parser.parse_args()
    server = start(
        [SERVESCOPE, "serve", "--simulate", "--gpus", str(args.gpus), "--listen", "127.0.0.1:0"], core=None
    )
    pid = server.process.pid
    samples: list[tuple[float, int, float]] = []
    began = time.monotonic()
    next_scrape = began
    try:
        while (elapsed := time.monotonic() - began) < args.minutes * 60:
            if time.monotonic() >= next_scrape:
                get(server, "/metrics")
                next_scrape += 15
            samples.append((elapsed, rss_bytes(pid), cpu_seconds(pid)))
            time.sleep(5)
    finally:
        server.stop()
    after_two = [(t, rss) for t, rss, _ in samples if t >= 120] or [(t, rss) for t, rss, _ in samples]
    growth = slope([(t / 60, rss / 2**20) for t, rss in after_two])  # MiB per minute
    t0, _, cpu0 = samples[0]
    t1, rss1, cpu1 = samples[-1]
    cpu_share = (cpu1 - cpu0) / (t1 - t0) * 100
    rss_at_2 = after_two[0][1] / 2**20
    data = {
        "machine": machine(),
        "gpus": args.gpus,
        "minutes": args.minutes,
        "rss_mib_end": rss1 / 2**20,
        "rss_mib_at_2min": rss_at_2,
        "rss_mib_max": max(s[1] for s in samples) / 2**20,
        "rss_slope_mib_per_min_after_2min": growth,
        "cpu_percent_of_one_core": cpu_share,
        "samples": [{"t": t, "rss": rss, "cpu": cpu} for t, rss, cpu in samples],
    }
    markdown = "\n".join(
        [
            "# Footprint benchmark",
            "",
            f"Machine: {machine()}",
            "",
            f"`servescope serve --simulate --gpus {args.gpus}`, NVML every 1 s, scraped every 15 s, "
            f"{args.minutes:g} minutes.",
            "",
            "| RSS at 2 min | RSS at end | RSS max | RSS slope after 2 min | CPU (share of one core) |",
            "| --- | --- | --- | --- | --- |",
            f"| {rss_at_2:.1f} MiB | {rss1 / 2**20:.1f} MiB | {data['rss_mib_max']:.1f} MiB | "
            f"{growth * 1024:+.1f} KiB/min | {cpu_share:.2f} % |",
            "",
            "Targets: RSS <= 80 MB, no growth between minute 2 and the end, CPU <= 3 % of one core.",
            "",
        ]
    )
    write("footprint", data, markdown)


if __name__ == "__main__":
    main()
