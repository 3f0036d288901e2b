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
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script: the root, for `bench`
from bench.common import RESULTS, machine
from bench.report_sections import (
    alert_section,
    dcgm_section,
    derived_section,
    footprint_section,
    freshness_section,
    ingest_section,
    memory_section,
    scrape_section,
    table,
)
from bench.report_targets import Target, targets

# The parts of `make bench`, in the order it runs them, and the results file each one writes.
PARTS = {
    "scrape": "scrape.py",
    "ingest": "ingest.py",
    "dcgm": "dcgm.py",
    "derived": "derived.py",
    "footprint": "footprint.py",
    "memory": "memory.py",
    "alert-quality": "alert_quality.py",
    "load-client": "load_client.py",
}
NOTE = (
    "Absolute times on a shared machine are noisy; the ratios (servescope against the baseline measured "
    "on the same machine in the same run) are the figures to compare."
)


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
            found[path.stem] = data
    return found, stale


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
    for name in PARTS:
        seconds = (found.get(name) or {}).get("wall_seconds")
        if name not in found:
            parts.append((name, None, "not run"))
        else:
            parts.append((name, seconds, "its own clock" if seconds is not None else "unknown"))
    return parts


def durations_section(parts: list[tuple[str, float | None, str]]) -> list[str]:
    rows = [
        [f"`bench/{PARTS[name]}`", "—" if s is None else f"{s / 60:.1f} min ({s:.0f} s)", how]
        for name, s, how in parts
    ]
    total = sum(s for _, s, _ in parts if s is not None)
    rows.append(["total", f"{total / 60:.1f} min ({total:.0f} s)", "budget 20 min"])
    return ["## How long each part took", "", *table(["part", "wall time", "measured by"], rows), ""]


def part_sections(found: dict[str, dict[str, Any]], results: Path) -> list[str]:
    """One section per part that has results, in the report's order."""
    sections: list[tuple[str, Callable[[dict[str, Any]], list[str]]]] = [
        ("scrape", scrape_section),
        ("ingest", ingest_section),
        ("footprint", footprint_section),
        ("footprint", freshness_section),
        ("memory", memory_section),
        ("dcgm", dcgm_section),
        ("derived", derived_section),
        ("alert-quality", lambda data: alert_section(data, results)),
    ]
    return [line for name, section in sections if name in found for line in section(found[name])]


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
    lines += part_sections(found, results)
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
