"""One report from the benchmark results: every section side by side, and each target met or not.

Reads results/*.json (scrape, ingest, dcgm, derived, footprint with freshness, alert-quality) and writes
results/REPORT.md and results/report.json. With --since (`make bench` passes the time it started), only
files written after that time count; older ones are listed as from an earlier run and left out, so a
stale figure never passes for this run's.
Usage: python bench/report.py [--since UNIX_TIME] [--results DIR]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from common import RESULTS, machine

# The parts of `make bench`, in the order it runs them, and the results file each one writes.
PARTS = {
    "scrape": "scrape.py",
    "ingest": "ingest.py",
    "dcgm": "dcgm.py",
    "derived": "derived.py",
    "footprint": "footprint.py",
    "alert-quality": "alert_quality.py",
}
MB = 1e6
MIB = 2**20
# "~0" growth: a Python arena step of 1 MiB inside an 8-minute window already fits ~0.1 MiB/min, while a
# real leak at that rate is 144 MiB a day; anything above it is reported as growth.
SLOPE_LIMIT_MIB_PER_MIN = 0.1
STEADY_AFTER = 120.0  # seconds: where footprint.py starts the RSS slope
NOTE = (
    "Absolute times on a shared machine are noisy; the ratios (servescope against the baseline measured "
    "on the same machine in the same run) are the figures to compare."
)


@dataclass
class Target:
    """One promise of the issue, what was measured, and whether it holds (None: not measured)."""

    name: str
    goal: str
    measured: str
    met: bool | None

    @property
    def verdict(self) -> str:
        return {True: "met", False: "NOT met", None: "not measured"}[self.met]


def load(results: Path, since: float | None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The results files of this run by name, and the names of older ones that were left out."""
    found: dict[str, dict[str, Any]] = {}
    stale: list[str] = []
    for path in sorted(results.glob("*.json")):
        if path.name == "report.json":
            continue
        if since is not None and path.stat().st_mtime < since:
            stale.append(path.name)
            continue
        data = json.loads(path.read_text())
        if isinstance(data, dict):
            data.setdefault("_mtime", path.stat().st_mtime)
            found[path.stem] = data
    return found, stale


def number(data: dict[str, Any] | None, *keys: str) -> float | None:
    """The first of `keys` holding a number, at the top level or in a summary/totals/overall object."""
    if not data:
        return None
    places = [data, *(data[k] for k in ("summary", "totals", "overall") if isinstance(data.get(k), dict))]
    for place in places:
        for key in keys:
            value = place.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
    return None


def at_most(value: float | None, limit: float) -> bool | None:
    return None if value is None else value <= limit


def at_least(value: float | None, limit: float) -> bool | None:
    return None if value is None else value >= limit


def shown(value: float | None, fmt: Callable[[float], str]) -> str:
    return "—" if value is None else fmt(value)


# --- targets -------------------------------------------------------------------------------------------


def scrape_targets(scrape: dict[str, Any] | None) -> list[Target]:
    rows = (scrape or {}).get("rows", [])
    at_8 = [r for r in rows if r["gpus"] == 8]
    worst_8 = max(at_8, key=lambda r: r["servescope"]["p50_ms"]) if at_8 else None
    big = next((r for r in rows if r["gpus"] == 64 and r["engines_requested"] == 16), None)
    p50_8 = worst_8["servescope"]["p50_ms"] if worst_8 else None
    p50_64 = big["servescope"]["p50_ms"] if big else None
    where = f" (worst: {worst_8['engines_requested']} engines)" if worst_8 else ""
    return [
        Target(
            "scrape at 8 GPUs",
            "/metrics p50 ≤ 2 ms at 8 GPUs x 18 NVLinks, every engine count",
            shown(p50_8, lambda v: f"{v:.2f} ms{where}"),
            at_most(p50_8, 2.0),
        ),
        Target(
            "scrape at 64 GPUs + 16 engines",
            "/metrics p50 ≤ 10 ms at 64 GPUs x 18 NVLinks + 16 engines",
            shown(p50_64, lambda v: f"{v:.2f} ms"),
            at_most(p50_64, 10.0),
        ),
    ]


def ingest_targets(ingest: dict[str, Any] | None) -> list[Target]:
    inputs = (ingest or {}).get("inputs", {})
    worst = min(inputs.items(), key=lambda item: item[1]["speedup_warm"]) if inputs else None
    value = worst[1]["speedup_warm"] if worst else None
    where = f" (worst: {worst[0]})" if worst else ""
    return [
        Target(
            "parser speed",
            "exposition parser ≥ 10x prometheus_client.parser on every input (later scrapes)",
            shown(value, lambda v: f"{v:.1f}x{where}"),
            at_least(value, 10.0),
        )
    ]


def footprint_targets(footprint: dict[str, Any] | None) -> list[Target]:
    fp = footprint or {}
    rss = fp.get("rss_mib_max")
    growth = fp.get("rss_slope_mib_per_min_after_2min")
    targets = [
        Target(
            "exporter RSS",
            "RSS ≤ 80 MB over the soak (max)",
            shown(rss, lambda v: f"{v * MIB / MB:.1f} MB ({v:.1f} MiB)"),
            None if rss is None else rss * MIB <= 80 * MB,
        ),
        Target(
            "RSS growth",
            f"RSS slope ~0 between minute 2 and the end (within ±{SLOPE_LIMIT_MIB_PER_MIN} MiB/min)",
            shown(growth, lambda v: f"{v * 1024:+.1f} KiB/min"),
            None if growth is None else abs(growth) <= SLOPE_LIMIT_MIB_PER_MIN,
        ),
    ]
    freshness = fp.get("freshness", {})
    for source, label in (("nvml", "NVML"), ("dcgm", "DCGM")):
        worst = freshness.get(source, {}).get("max_seconds")
        targets.append(
            Target(
                f"{label} freshness",
                f"age of the newest {label} value at scrape time ≤ 2 s (max over the soak)",
                shown(worst, lambda v: f"{v:.2f} s"),
                at_most(worst, 2.0),
            )
        )
    return targets


def alert_targets(alerts: dict[str, Any] | None) -> list[Target]:
    precision = number(alerts, "precision")
    recall = number(alerts, "recall")
    lead = number(alerts, "leak_lead_minutes", "leak_minutes_before_oom", "leak_lead_time_minutes")
    leak = (alerts or {}).get("leak")
    if lead is None and isinstance(leak, dict):
        lead = number(leak, "lead_minutes", "minutes_before_oom")
    return [
        Target(
            "alert precision",
            "alert precision ≥ 0.95 over the scenario library",
            shown(precision, lambda v: f"{v:.3f}"),
            at_least(precision, 0.95),
        ),
        Target(
            "alert recall",
            "alert recall 1.0 over the scenario library",
            shown(recall, lambda v: f"{v:.3f}"),
            at_least(recall, 1.0),
        ),
        Target(
            "leak alert lead",
            "memory-leak alert ≥ 15 min before OOM at 40 MiB/min",
            shown(lead, lambda v: f"{v:.1f} min"),
            at_least(lead, 15.0),
        ),
    ]


def targets(found: dict[str, dict[str, Any]]) -> list[Target]:
    return [
        *scrape_targets(found.get("scrape")),
        *ingest_targets(found.get("ingest")),
        *footprint_targets(found.get("footprint")),
        *alert_targets(found.get("alert-quality")),
    ]


# --- sections ------------------------------------------------------------------------------------------


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def machine_line(info: dict[str, Any]) -> str:
    memory = f", {info['memory_gib']} GiB memory" if info.get("memory_gib") else ""
    return (
        f"{info.get('cpu', 'unknown CPU')}, {info.get('cores')} cores{memory}, Python {info.get('python')}, "
        f"Linux kernel {info.get('kernel') or info.get('platform')}"
    )


def other_machines(found: dict[str, dict[str, Any]], info: dict[str, Any]) -> list[str]:
    """Results files measured on another machine than the one writing the report."""
    return sorted(
        name
        for name, data in found.items()
        if isinstance(data.get("machine"), dict)
        and (data["machine"].get("cpu"), data["machine"].get("cores")) != (info.get("cpu"), info.get("cores"))
    )


def targets_section(found_targets: list[Target]) -> list[str]:
    lines = [
        "## Targets",
        "",
        *table(["target", "measured", "verdict"], [[t.goal, t.measured, t.verdict] for t in found_targets]),
    ]
    missed = [t for t in found_targets if t.met is not True]
    if missed:
        lines.append("")
    for t in missed:
        if t.met is False:
            lines.append(f"- **Target missed: {t.name}.** Goal: {t.goal}; measured: {t.measured}.")
        else:
            lines.append(f"- **Not measured in this run: {t.name}.** Goal: {t.goal}.")
    return [*lines, ""]


def durations(found: dict[str, dict[str, Any]]) -> list[tuple[str, float | None, str]]:
    """(part, seconds, how the figure was obtained) for every part of `make bench`, in order."""
    parts: list[tuple[str, float | None, str]] = []
    previous_end: float | None = None
    for name in PARTS:
        data = found.get(name)
        if data is None:
            parts.append((name, None, "not run"))
            continue
        seconds = number(data, "wall_seconds")
        how = "its own clock"
        if seconds is None and previous_end is not None:
            # A script that does not time itself: the gap since the previous part's results file.
            seconds, how = data["_mtime"] - previous_end, "from file times"
        parts.append((name, seconds, how))
        previous_end = data["_mtime"]
    return parts


def durations_section(parts: list[tuple[str, float | None, str]]) -> list[str]:
    rows = [
        [f"`bench/{PARTS[name]}`", "—" if s is None else f"{s / 60:.1f} min ({s:.0f} s)", how]
        for name, s, how in parts
    ]
    total = sum(s for _, s, _ in parts if s is not None)
    rows.append(["total", f"{total / 60:.1f} min ({total:.0f} s)", "budget 20 min"])
    return ["## How long each part took", "", *table(["part", "wall time", "measured by"], rows), ""]


def scrape_section(scrape: dict[str, Any]) -> list[str]:
    rows = []
    for r in scrape.get("rows", []):
        ours, base = r["servescope"], r["generate_latest"]
        engines = str(r["engines_requested"])
        if r.get("engines_running") != r["engines_requested"]:
            engines += f" (ran {r.get('engines_running')})"
        rows.append(
            [
                str(r["gpus"]),
                engines,
                f"{r['series']:,}",
                f"{ours['p50_ms']:.2f} / {ours['p99_ms']:.2f}",
                f"{ours['per_second']:,.0f}",
                f"{r['servescope_us_per_line']:.3f}",
                f"{base['p50_ms']:.1f}",
                f"**{r['p50_ratio']:.0f}x**",
            ]
        )
    header = ["GPUs", "engines", "series", "servescope p50 / p99 ms", "scrapes/s", "µs/line"]
    header += ["generate_latest p50 ms", "ratio (p50)"]
    lines = [
        "## Scrape",
        "",
        "`/metrics` of `servescope serve --simulate` (18 NVLinks per GPU, DCGM streaming, engines' series "
        "passed through), the exporter and its stand-ins on one core and the client on the other, against "
        "the same bytes rendered per request by prometheus_client's `generate_latest`. An engine needs a "
        'GPU, so engines are capped at the GPU count ("ran" shows the cap).',
        "",
        *table(header, rows),
        "",
        node_exporter_line(scrape),
        "",
    ]
    return lines


def node_exporter_line(scrape: dict[str, Any]) -> str:
    ref = scrape.get("node_exporter") or {}
    if not ref.get("installed"):
        return (
            "Reference: prometheus-node-exporter not installed (`apt-get install prometheus-node-exporter`)."
        )
    if "us_per_line" not in ref:
        return f"Reference: prometheus-node-exporter {ref.get('error', 'did not run')}."
    ours = [r["servescope_us_per_line"] for r in scrape.get("rows", [])]
    span = f"{min(ours):.3f} to {max(ours):.3f}" if ours else "—"
    return (
        f"Reference on this machine: node_exporter with its default collectors serves {ref['series']:,} "
        f"lines at p50 {ref['timing']['p50_ms']:.2f} ms, **{ref['us_per_line']:.3f} µs per line**; "
        f"servescope {span} µs per line across the cells above."
    )


def ingest_section(ingest: dict[str, Any]) -> list[str]:
    rows = [
        [
            name,
            f"{r['lines']:,.0f}",
            f"{r['prometheus_client_us_per_line']:.2f}",
            f"{r['cold_us_per_line']:.2f}",
            f"{r['warm_us_per_line']:.2f}",
            f"{r['speedup_cold']:.1f}x",
            f"**{r['speedup_warm']:.1f}x**",
        ]
        for name, r in ingest.get("inputs", {}).items()
    ]
    header = ["input", "lines", "prometheus_client µs/line", "servescope first scrape", "later scrapes"]
    header += ["ratio first", "ratio later"]
    skipped = ingest.get("skipped") or []
    lines = [
        "## Ingestion",
        "",
        f"µs per line, best of {ingest.get('runs')} runs; every exposition in the shared samples and a "
        "synthetic 16-engine vLLM exposition.",
        "",
        *table(header, rows),
        "",
    ]
    if skipped:
        lines += [f"Not expositions, so not parsed: {', '.join(skipped)}.", ""]
    return lines


def dcgm_section(dcgm: dict[str, Any]) -> list[str]:
    rates = dcgm.get("parser_rows_per_second", {})
    sup = dcgm.get("supervisor", {})
    rows = [[f"DCGM {layout}", f"{rate:,.0f}"] for layout, rate in rates.items()]
    return [
        "## DCGM",
        "",
        *table(["dmon layout", "parser rows/s"], rows),
        "",
        f"Supervisor, reader threads and one collect per second while the fake dcgmi streams 8 GPUs x 20 "
        f"fields: {sup.get('cpu_percent', float('nan')):.2f} % of one core.",
        "",
    ]


def derived_section(derived: dict[str, Any]) -> list[str]:
    return [
        "## Derived signals",
        "",
        *table(
            ["cycle (8 GPUs + 8 processes + 4 engines, 1 h history)", "median"],
            [
                ["with every trend and leak verdict refit", f"{derived.get('cycle_with_refit_ms')} ms"],
                ["peaks, exhaustion, KV, advice only", f"{derived.get('cycle_cached_ms')} ms"],
                ["CPU at the defaults", f"{derived.get('cpu_share_at_defaults_percent')} % of a core"],
                ["sample rings held", f"{derived.get('history_bytes', 0) / MIB:.2f} MiB"],
            ],
        ),
        "",
    ]


def footprint_section(fp: dict[str, Any]) -> list[str]:
    stand_ins = ", ".join(
        f"{kind} {share:.2f} %"
        for kind, share in sorted(fp.get("children_cpu_percent_of_one_core", {}).items())
    )
    rows = [
        [
            "CPU, share of one core",
            f"{fp['cpu_percent_of_one_core']:.2f} % ({fp.get('cpu_percent_of_one_core_after_2min', 0):.2f} % "
            "after minute 2)",
            "131 % (dcgm-exporter#311)",
        ],
        [
            "RSS",
            f"{fp['rss_mib_max']:.1f} MiB max, {fp['rss_slope_mib_per_min_after_2min'] * 1024:+.1f} KiB/min "
            "after minute 2",
            "grows to 512 MiB, OOM-killed (dcgm-exporter#702, pytorch/ci-infra#1011)",
        ],
    ]
    lines = [
        "## Footprint",
        "",
        f"`servescope serve --simulate --gpus {fp.get('gpus')} --engines {fp.get('engines')}` at the default "
        f"intervals with the fake dcgmi streaming ({fp.get('dcgm_series_last_scrape')} DCGM series), "
        f"scraped every 15 s for {fp.get('minutes'):g} min. dcgm-exporter's figures are as reported by "
        "its users in the issues cited, not measured here.",
        "",
        *table(["", "servescope (measured here)", "dcgm-exporter (reported by users)"], rows),
        "",
        f"Stand-ins for vLLM and the GPU, not counted above: {stand_ins or 'none'} of one core.",
        "",
    ]
    if fp.get("rss_slope_from_seconds", STEADY_AFTER) < STEADY_AFTER:
        lines += ["The soak was shorter than 2 minutes: the slope includes start-up allocation.", ""]
    return lines


def freshness_section(fp: dict[str, Any]) -> list[str]:
    intervals = {"nvml": "1 s", "dcgm": "1 s", "vllm": "5 s", "derived": "5 s"}
    rows = [
        [
            source,
            intervals.get(source, "?"),
            f"{f['p50_seconds']:.2f} s",
            f"{f['max_seconds']:.2f} s",
            f"{f['stalest_max_seconds']:.2f} s" if source == "vllm" else "",
            "30 s default collection interval" if source in ("nvml", "dcgm") else "",
        ]
        for source, f in fp.get("freshness", {}).items()
    ]
    header = ["source", "interval", "age p50", "age max", "stalest engine max", "dcgm-exporter"]
    return [
        "## Freshness",
        "",
        "Age of each source's newest value when a scrape is answered: the scrape's wall time minus "
        "`servescope_source_last_success_timestamp_seconds` (per engine for vLLM), over the footprint soak. "
        "dcgm-exporter collects every 30 s by default while ServiceMonitors scrape every 15 s, so its values "
        "are up to ~40 s stale (shared reference, dcgm.md).",
        "",
        *table(header, rows),
        "",
    ]


def first_table(markdown: str) -> list[str]:
    """The first Markdown table of a document: its summary."""
    lines: list[str] = []
    for line in markdown.splitlines():
        if line.lstrip().startswith("|"):
            lines.append(line.strip())
        elif lines:
            break
    return lines


def alert_section(alerts: dict[str, Any], results: Path) -> list[str]:
    md = results / "alert-quality.md"
    summary = first_table(md.read_text()) if md.exists() else []
    return [
        "## Alert quality",
        "",
        *(summary or ["(alert-quality.json has no summary table in alert-quality.md)"]),
        "",
        "Details: `alert-quality.md`.",
        "",
    ]


def render(
    found: dict[str, dict[str, Any]], stale: list[str], results: Path, now: float
) -> tuple[str, dict[str, Any]]:
    """The Markdown report and its JSON twin."""
    info = machine()
    found_targets = targets(found)
    parts = durations(found)
    date = datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# servescope benchmark report",
        "",
        f"Run on {date}, on {machine_line(info)}.",
        "",
        NOTE,
        "",
    ]
    elsewhere = other_machines(found, info)
    if elsewhere:
        lines += [f"Measured on another machine than this line names: {', '.join(elsewhere)}.", ""]
    lines += [
        *targets_section(found_targets),
        *durations_section(parts),
    ]
    sections: list[tuple[str, Callable[[dict[str, Any]], list[str]]]] = [
        ("scrape", scrape_section),
        ("ingest", ingest_section),
        ("footprint", footprint_section),
        ("footprint", freshness_section),
        ("dcgm", dcgm_section),
        ("derived", derived_section),
        ("alert-quality", lambda data: alert_section(data, results)),
    ]
    for name, section in sections:
        if name in found:
            lines += section(found[name])
    others = sorted(set(found) - set(PARTS))
    if others:
        lines += [f"Other results files of this run, not summarised: {', '.join(others)}.", ""]
    if stale:
        lines += [f"Left out, written before this run: {', '.join(stale)}.", ""]
    data = {
        "generated_at": datetime.datetime.fromtimestamp(now, datetime.UTC).isoformat(timespec="seconds"),
        "machine": info,
        "targets": [asdict(t) | {"verdict": t.verdict} for t in found_targets],
        "durations_seconds": {name: seconds for name, seconds, _ in parts},
        "parts_present": sorted(found),
        "stale": stale,
    }
    return "\n".join(lines), data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--since", type=float, help="only results written after this Unix time count")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    found, stale = load(args.results, args.since)
    markdown, data = render(found, stale, args.results, time.time())
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "REPORT.md").write_text(markdown)
    (args.results / "report.json").write_text(json.dumps(data, indent=2) + "\n")
    print(markdown)


if __name__ == "__main__":
    main()
