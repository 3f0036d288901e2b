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


def load_client_targets(load: dict[str, Any] | None) -> list[Target]:
    """load_client.py's claims: they need free cores, which is why a benchmark measures them."""
    below = (load or {}).get("below_capacity", [])
    streamed = [r for r in below if r["agrees"] is not None]
    ratios = [r["ratio"] for r in (load or {}).get("coordinated_omission", [])]
    out = (load or {}).get("scale_out")
    targets = [
        Target(
            "load step below capacity",
            "a step at 25 % of the mock's capacity is valid at the default rules, every API and mode",
            f"{sum(r['valid'] for r in below)} of {len(below)} valid" if below else "—",
            all(r["valid"] for r in below) if below else None,
        ),
        Target(
            "client TTFT vs the engine's",
            "the client's P99 TTFT lies in the engine histogram's P99 bucket (streamed steps)",
            f"{sum(r['agrees'] for r in streamed)} of {len(streamed)}" if streamed else "—",
            all(r["agrees"] for r in streamed) if streamed else None,
        ),
        judged(
            "coordinated omission",
            "open-loop P99 TTFT ≥ 3x the closed loop's at twice the mock's capacity",
            min(ratios) if ratios else None,
            lambda v: f"{v:.1f}x (lowest)",
            lambda v: v >= 3.0,
        ),
    ]
    goal = "Locust master + 2 workers keep a Poisson schedule one process cannot"
    if not out:
        return [*targets, Target("Locust scale-out", goal, "—", None)]
    alone, locust = out["one_process"][-1], out["locust_2_workers"]
    verdict = {True: "valid", False: "invalid"}
    measured = (
        f"one process {alone['achieved']} of {alone['rate']} req/s ({verdict[alone['valid']]}), "
        f"Locust {locust['achieved']} ({verdict[locust['valid']]})"
    )
    return [*targets, Target("Locust scale-out", goal, measured, locust["valid"] and not alone["valid"])]


def targets(found: dict[str, dict[str, Any]]) -> list[Target]:
    return [
        *scrape_targets(found.get("scrape")),
        *ingest_targets(found.get("ingest")),
        *footprint_targets(found.get("footprint")),
        *memory_targets(found.get("memory")),
        *alert_targets(found.get("alert-quality")),
        *load_client_targets(found.get("load-client")),
    ]
