"""The issue's targets for `make bench`: each one's goal, the figure measured, and met / NOT met."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MB = 1e6
MIB = 2**20
# "~0" growth: a Python arena step of 1 MiB inside an 8-minute window already fits ~0.1 MiB/min, while a
# real leak at that rate is 144 MiB a day; anything above it is reported as growth.
SLOPE_LIMIT_MIB_PER_MIN = 0.1
STEADY_AFTER = 120.0  # seconds: where footprint.py starts the RSS slope


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


def figure(data: dict[str, Any] | None, key: str) -> float | None:
    """A headline number of alert_quality.py's results: they sit in its `summary` object."""
    value = ((data or {}).get("summary") or {}).get(key)
    return None if value is None else float(value)


def judged(
    name: str, goal: str, value: float | None, fmt: Callable[[float], str], holds: Callable[[float], bool]
) -> Target:
    """Target `name`: the figure `value` shown with `fmt`, met when it `holds` (not measured: None)."""
    return Target(name, goal, shown(value, fmt), None if value is None else holds(value))


def shown(value: float | None, fmt: Callable[[float], str]) -> str:
    return "—" if value is None else fmt(value)


# --- targets -------------------------------------------------------------------------------------------


def scrape_rows(scrape: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The scrape cells (GPUs x engines) as scrape.py wrote them."""
    return list((scrape or {}).get("rows", []))


def scrape_targets(scrape: dict[str, Any] | None) -> list[Target]:
    rows = scrape_rows(scrape)
    at_8 = [r for r in rows if r["gpus"] == 8]
    worst_8 = max(at_8, key=lambda r: r["servescope"]["p50_ms"]) if at_8 else None
    big = next((r for r in rows if r["gpus"] == 64 and r["engines_requested"] == 16), None)
    p50_8 = worst_8["servescope"]["p50_ms"] if worst_8 else None
    p50_64 = big["servescope"]["p50_ms"] if big else None
    where = f" (worst: {worst_8['engines_requested']} engines)" if worst_8 else ""
    goal_8 = "/metrics p50 ≤ 2 ms at 8 GPUs x 18 NVLinks, every engine count"
    goal_64 = "/metrics p50 ≤ 10 ms at 64 GPUs x 18 NVLinks + 16 engines"
    return [
        judged("scrape at 8 GPUs", goal_8, p50_8, lambda v: f"{v:.2f} ms{where}", lambda v: v <= 2.0),
        judged(
            "scrape at 64 GPUs + 16 engines", goal_64, p50_64, lambda v: f"{v:.2f} ms", lambda v: v <= 10.0
        ),
    ]


def ingest_targets(ingest: dict[str, Any] | None) -> list[Target]:
    inputs = (ingest or {}).get("inputs", {})
    worst = min(inputs.items(), key=lambda item: item[1]["speedup_warm"]) if inputs else None
    value = worst[1]["speedup_warm"] if worst else None
    where = f" (worst: {worst[0]})" if worst else ""
    goal = "exposition parser ≥ 10x prometheus_client.parser on every input (later scrapes)"
    return [judged("parser speed", goal, value, lambda v: f"{v:.1f}x{where}", lambda v: v >= 10.0)]


def footprint_targets(footprint: dict[str, Any] | None) -> list[Target]:
    fp = footprint or {}
    rss = fp.get("rss_mib_max")
    growth = fp.get("rss_slope_mib_per_min_after_2min")
    slope_goal = f"RSS slope ~0 between minute 2 and the end (within ±{SLOPE_LIMIT_MIB_PER_MIN} MiB/min)"
    targets = [
        judged(
            "exporter RSS",
            "RSS ≤ 80 MB over the soak (max)",
            rss,
            lambda v: f"{v * MIB / MB:.1f} MB ({v:.1f} MiB)",
            lambda v: v * MIB <= 80 * MB,
        ),
        judged(
            "RSS growth",
            slope_goal,
            growth,
            lambda v: f"{v * 1024:+.1f} KiB/min",
            lambda v: abs(v) <= SLOPE_LIMIT_MIB_PER_MIN,
        ),
    ]
    freshness = fp.get("freshness", {})
    for source, label in (("nvml", "NVML"), ("dcgm", "DCGM")):
        worst = freshness.get(source, {}).get("max_seconds")
        goal = f"age of the newest {label} value at scrape time ≤ 2 s (max over the soak)"
        targets.append(judged(f"{label} freshness", goal, worst, lambda v: f"{v:.2f} s", lambda v: v <= 2.0))
    return targets


def memory_targets(memory: dict[str, Any] | None) -> list[Target]:
    m = memory or {}
    peak, target = m.get("peak_rss_mib"), m.get("target_mib", 288.0)
    goal = (
        f"peak RSS < {target:g} MiB (75 % of the DaemonSet's limit) with 8 engines' hostile 4 MiB pages and "
        "20,000 DCGM entities"
    )
    share = m.get("peak_share_of_limit")
    where = f" ({share:.0%} of the limit)" if share is not None else ""
    return [
        judged(
            "memory under hostile inputs", goal, peak, lambda v: f"{v:.1f} MiB{where}", lambda v: v < target
        )
    ]


def alert_targets(alerts: dict[str, Any] | None) -> list[Target]:
    precision = figure(alerts, "precision")
    recall = figure(alerts, "recall")
    lead = figure(alerts, "leak_lead_minutes")
    library = "over the scenario library"
    return [
        judged(
            "alert precision",
            f"alert precision ≥ 0.95 {library}",
            precision,
            lambda v: f"{v:.3f}",
            lambda v: v >= 0.95,
        ),
        judged(
            "alert recall", f"alert recall 1.0 {library}", recall, lambda v: f"{v:.3f}", lambda v: v >= 1.0
        ),
        judged(
            "leak alert lead",
            "memory-leak alert ≥ 15 min before OOM at 40 MiB/min",
            lead,
            lambda v: f"{v:.1f} min",
            lambda v: v >= 15.0,
        ),
    ]


def targets(found: dict[str, dict[str, Any]]) -> list[Target]:
    return [
        *scrape_targets(found.get("scrape")),
        *ingest_targets(found.get("ingest")),
        *footprint_targets(found.get("footprint")),
        *memory_targets(found.get("memory")),
        *alert_targets(found.get("alert-quality")),
    ]
