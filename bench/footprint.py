"""Footprint and freshness of `servescope serve --simulate` over a soak at the default intervals.

The exporter runs 8 simulated GPUs, 4 simulated vLLM engines and DCGM streaming from the fake dcgmi, at
its defaults (NVML and DCGM every 1 s, vLLM every 5 s, derived signals every 5 s). A scraper fetches
/metrics every 15 s on average, as Prometheus would, each scrape shifted by a random 0-5 s so that the
scrapes land at every phase of the collection cycles. RSS and CPU are sampled every 5 s; the RSS slope is a
least-squares fit between minute 2 and the end, so start-up allocation does not count as growth. The
engines and the fake dcgmi are stand-ins for vLLM and the GPU: their CPU is reported apart, never in the
exporter's figure.

Freshness: at each scrape, the age of each source's newest value is the scrape's wall time minus
`servescope_source_last_success_timestamp_seconds`, stamped when a collection returns (its values were
read during it, at most its duration earlier; a DCGM row is at most one dmon delay older still); the
exposition carries no per-sample timestamps. For vLLM each engine's own timestamp counts (stamped when
its /metrics was read): the newest one, and the stalest engine too.
Usage: python bench/footprint.py [--minutes 10] [--gpus 8] [--engines 4]
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script: the root, for `bench`
from bench.common import SERVESCOPE, TICKS, Server, get, machine, start, write

SAMPLE_SECONDS = 5.0
SCRAPE_SECONDS = 15.0
JITTER_SECONDS = 5.0  # the longest default collection interval (vLLM, derived)
STEADY_AFTER = 120.0  # start-up allocation (imports, first renders, discovery) is over by minute 2
LAST_SUCCESS = re.compile(
    r'^servescope_source_last_success_timestamp_seconds\{source="(\w+)"(?:,endpoint="([^"]*)")?\} (\S+)$',
    re.M,
)
SOURCES = ("nvml", "dcgm", "vllm", "derived")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0  # a zombie has no VmRSS line


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def stand_in_kind(command: str) -> str:
    if "vllm_server" in command:
        return "vllm engines"
    return "dcgmi" if "dcgmi" in command else "other"


def descendants(pid: int) -> dict[int, str]:
    """Every live process below `pid`, with the kind of stand-in it is."""
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().decode(errors="replace")
        except (OSError, ValueError):
            continue  # exited while we looked
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in found:
                command = commands.get(child, "")
                found[child] = stand_in_kind(command)
                frontier.append(child)
    return found


def slope(points: list[tuple[float, float]]) -> float:
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    num = sum((t - mean_t) * (v - mean_v) for t, v in points)
    den = sum((t - mean_t) ** 2 for t, _ in points)
    return num / den if den else 0.0


class Children:
    """CPU seconds and RSS of the exporter's children, by kind, robust to a child being restarted."""

    def __init__(self) -> None:
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.kind: dict[int, str] = {}
        self.rss: dict[str, int] = {}

    def sample(self, pid: int) -> None:
        rss: dict[str, int] = {}
        for child, kind in descendants(pid).items():
            try:
                cpu, resident = cpu_seconds(child), rss_bytes(child)
            except OSError:
                continue
            self.first.setdefault(child, cpu)
            self.last[child] = cpu
            self.kind[child] = kind
            rss[kind] = rss.get(kind, 0) + resident
        self.rss = rss

    def cpu_by_kind(self) -> dict[str, float]:
        spent: dict[str, float] = {}
        for child, kind in self.kind.items():
            spent[kind] = spent.get(kind, 0.0) + self.last[child] - self.first[child]
        return spent


def ages_at_scrape(body: bytes, scraped_at: float) -> dict[str, dict[str, float]]:
    """Per source: age of its newest value, and of its stalest engine when it has several endpoints."""
    own: dict[str, float] = {}
    endpoints: dict[str, list[float]] = {}
    for source, endpoint, value in LAST_SUCCESS.findall(body.decode()):
        if endpoint:
            endpoints.setdefault(source, []).append(float(value))
        else:
            own[source] = float(value)
    ages: dict[str, dict[str, float]] = {}
    for source, stamp in own.items():
        # vLLM's own timestamp marks the end of a cycle over every engine; each engine's marks its data.
        stamps = endpoints.get(source, [stamp])
        if source == "vllm" and source not in endpoints:
            continue  # no engine joined yet: nothing to be fresh about
        if max(stamps) <= 0:
            continue  # never succeeded
        ages[source] = {"newest": scraped_at - max(stamps), "stalest": scraped_at - min(stamps)}
    return ages


def summarise_freshness(scrapes: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    summary: dict[str, dict[str, float]] = {}
    for source in SOURCES:
        newest = [s["ages"][source]["newest"] for s in scrapes if source in s["ages"]]
        stalest = [s["ages"][source]["stalest"] for s in scrapes if source in s["ages"]]
        if newest:
            summary[source] = {
                "scrapes": len(newest),
                "p50_seconds": statistics.median(newest),
                "max_seconds": max(newest),
                "stalest_max_seconds": max(stalest),
            }
    return summary


@dataclass
class Soak:
    samples: list[tuple[float, int, float]] = field(default_factory=list)  # (t, RSS bytes, CPU s)
    scrapes: list[dict[str, Any]] = field(default_factory=list)
    children: Children = field(default_factory=Children)
    dcgm_series: int = 0


def soak(args: argparse.Namespace) -> Soak:
    argv = [SERVESCOPE, "serve", "--simulate", "--gpus", str(args.gpus), "--engines", str(args.engines)]
    server = start([*argv, "--listen", "127.0.0.1:0"], core=None)
    pid = server.process.pid
    run = Soak()
    jitter = random.Random(1)  # the same scrape phases run after run
    began = time.monotonic()
    next_sample, next_scrape, scrape_slot = began, began, began
    try:
        while (now := time.monotonic()) - began < args.minutes * 60:
            if now >= next_scrape:
                run.scrapes.append(scrape(server, now - began))
                run.dcgm_series = run.scrapes[-1].pop("dcgm_series")
                # 15 s apart on average, each shifted by 0-5 s: scrapes on a fixed 15 s grid would hit
                # the 1 s and 5 s collection cycles at one phase only, and every age would be the same.
                scrape_slot += SCRAPE_SECONDS
                next_scrape = scrape_slot + jitter.uniform(0, JITTER_SECONDS)
            if now >= next_sample:
                run.samples.append((now - began, rss_bytes(pid), cpu_seconds(pid)))
                run.children.sample(pid)
                next_sample += SAMPLE_SECONDS
            time.sleep(max(0.0, min(next_sample, next_scrape) - time.monotonic()))
    finally:
        server.stop()
    return run


def scrape(server: Server, elapsed: float) -> dict[str, Any]:
    _, body = get(server, "/metrics")
    scraped_at = time.time()  # after the response: ages are never understated
    series = [line for line in body.decode().splitlines() if line and line[0] != "#"]
    return {
        "t": elapsed,
        "series": len(series),
        "dcgm_series": sum(1 for line in series if line.startswith("servescope_dcgm_")),
        "ages": ages_at_scrape(body, scraped_at),
    }


def summarise(run: Soak, args: argparse.Namespace) -> dict[str, Any]:
    samples = run.samples
    after_two = [s for s in samples if s[0] >= STEADY_AFTER] or samples
    growth = slope([(t / 60, rss / 2**20) for t, rss, _ in after_two])  # MiB per minute
    t0, _, cpu0 = samples[0]
    t1, rss1, cpu1 = samples[-1]
    ts, rss_s, cpus = after_two[0]
    span = max(t1 - t0, 1e-9)
    return {
        "machine": machine(),
        "gpus": args.gpus,
        "engines": args.engines,
        "minutes": args.minutes,
        "dcgm_series_last_scrape": run.dcgm_series,
        "rss_mib_at_2min": rss_s / 2**20,
        "rss_mib_end": rss1 / 2**20,
        "rss_mib_max": max(s[1] for s in samples) / 2**20,
        "rss_slope_mib_per_min_after_2min": growth,
        # Later than 0 unless the soak was shorter than 2 minutes (a smoke run): then start-up counts too.
        "rss_slope_from_seconds": ts,
        "cpu_percent_of_one_core": (cpu1 - cpu0) / span * 100,
        "cpu_percent_of_one_core_after_2min": (cpu1 - cpus) / max(t1 - ts, 1e-9) * 100,
        "children_cpu_percent_of_one_core": {
            kind: spent / span * 100 for kind, spent in run.children.cpu_by_kind().items()
        },
        "children_rss_mib_end": {kind: rss / 2**20 for kind, rss in run.children.rss.items()},
        "freshness": summarise_freshness(run.scrapes),
        "samples": [{"t": t, "rss": rss, "cpu": cpu} for t, rss, cpu in samples],
        "scrapes": run.scrapes,
    }


def markdown(data: dict[str, Any]) -> str:
    rss = (
        f"| {data['rss_mib_at_2min']:.1f} MiB | {data['rss_mib_end']:.1f} MiB "
        f"| {data['rss_mib_max']:.1f} MiB "
        f"| {data['rss_slope_mib_per_min_after_2min'] * 1024:+.1f} KiB/min "
        f"| {data['cpu_percent_of_one_core']:.2f} % | {data['cpu_percent_of_one_core_after_2min']:.2f} % |"
    )
    stand_ins = ", ".join(
        f"{kind} {share:.2f} %" for kind, share in sorted(data["children_cpu_percent_of_one_core"].items())
    )
    lines = [
        "# Footprint and freshness benchmark",
        "",
        f"Machine: {data['machine']}",
        "",
        f"`servescope serve --simulate --gpus {data['gpus']} --engines {data['engines']}` at the default "
        f"intervals, DCGM streaming ({data['dcgm_series_last_scrape']} servescope_dcgm_* series at the last "
        f"scrape), scraped every {SCRAPE_SECONDS:g} s, {data['minutes']:g} minutes.",
        "",
        "| RSS at 2 min | RSS at end | RSS max | RSS slope after 2 min | exporter CPU | after 2 min |",
        "| --- | --- | --- | --- | --- | --- |",
        rss,
        "",
        f"Stand-ins, not counted above: {stand_ins or 'none'} (share of one core).",
        "",
        "| source | scrapes | age of newest value p50 | max | stalest engine max |",
        "| --- | --- | --- | --- | --- |",
        *[
            f"| {source} | {f['scrapes']} | {f['p50_seconds']:.2f} s | {f['max_seconds']:.2f} s "
            f"| {f['stalest_max_seconds']:.2f} s |"
            for source, f in data["freshness"].items()
        ],
        "",
        "Targets: RSS <= 80 MB, no growth between minute 2 and the end; NVML and DCGM values <= 2 s old.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--engines", type=int, default=4)
    args = parser.parse_args()
    data = summarise(soak(args), args)
    write("footprint", data, markdown(data))


if __name__ == "__main__":
    main()
