"""A capacity run as data: knee, curve, sizing and cross-checks, and its JSON (read back by compare)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from servescope.kit.capacity.search import Knee, SearchPlan, curve
from servescope.kit.capacity.sizing import CrossCheck, Provision, cross_check
from servescope.kit.capacity.steps import Slo, StepSummary, latency

KIND = "servescope-capacity"
MAX_JSON_BYTES = 64 * 1024 * 1024


@dataclass(slots=True)
class CapacityRun:
    """What one `servescope capacity run` measured, for one engine configuration."""

    label: str
    plan: SearchPlan
    knee: Knee
    provision: Provision | None = None
    cross_checks: list[CrossCheck] = field(default_factory=list)
    # (offered, seed) -> the first SLO's per-request latencies: what compare tests.
    latencies: dict[tuple[float, int], list[float]] = field(default_factory=dict)

    @property
    def steps(self) -> list[StepSummary]:
        return curve(self.knee.steps)


def build_run(label: str, plan: SearchPlan, knee: Knee, provision: Provision | None) -> CapacityRun:
    """Collect a run's cross-checks and per-request latencies from the knee's raw steps."""
    metric = plan.slos[0].metric
    checks = [check for step in knee.raw if (check := cross_check(step)) is not None]
    latencies = {
        (summary.offered, summary.seed): [latency(r, metric) for r in step.records]
        for summary, step in zip(knee.steps, knee.raw, strict=True)
    }
    return CapacityRun(label, plan, knee, provision, checks, latencies)


def to_json(run: CapacityRun) -> dict[str, Any]:
    """The run as JSON-ready data; infinite latencies (never finished) become null."""
    knee = run.knee
    return {
        "kind": KIND,
        "label": run.label,
        "plan": asdict(run.plan),
        "knee": {
            "estimate": knee.estimate,
            "lower": knee.lower,
            "upper": knee.upper,
            "repeats": knee.repeats,
            "pruned": knee.pruned,
            "reached_max": knee.reached_max,
        },
        "steps": [_finite(asdict(step)) for step in run.steps],
        "provision": None if run.provision is None else asdict(run.provision),
        "cross_checks": [_finite(asdict(check)) for check in run.cross_checks],
        "latencies": [
            {"offered": offered, "seed": seed, "values": [_finite(v) for v in values]}
            for (offered, seed), values in sorted(run.latencies.items())
        ],
    }


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _inf(value: float | None) -> float:
    return math.inf if value is None else float(value)


def load(path: Path) -> CapacityRun:
    """Read a run written by `servescope capacity run --out`; raises ValueError naming the file."""
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise ValueError(f"{path}: larger than {MAX_JSON_BYTES} bytes")
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("kind") != KIND:
            raise ValueError(f"{path}: not a servescope capacity result (kind {data.get('kind')!r})")
        return _from_json(data)
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: cannot read a capacity result: {err}") from err


def _from_json(data: dict[str, Any]) -> CapacityRun:
    plan_data = dict(data["plan"])
    plan_data["slos"] = tuple(Slo(**slo) for slo in plan_data["slos"])
    plan = SearchPlan(**plan_data)
    k = data["knee"]
    knee = Knee(k["estimate"], k["lower"], k["upper"], [tuple(pair) for pair in k["repeats"]])
    knee.pruned, knee.reached_max = k["pruned"], k["reached_max"]
    for step in data["steps"]:
        step["percentiles"] = {name: _inf(v) for name, v in step["percentiles"].items()}
        step["mean_running"] = math.nan if step["mean_running"] is None else step["mean_running"]
        knee.steps.append(StepSummary(**step))
    latencies = {
        (float(item["offered"]), int(item["seed"])): [_inf(v) for v in item["values"]]
        for item in data["latencies"]
    }
    provision = None if data["provision"] is None else Provision(**data["provision"])
    checks = [
        CrossCheck(**{**c, "client_p99": _inf(c["client_p99"]), "engine_high": _inf(c["engine_high"])})
        for c in data["cross_checks"]
    ]
    return CapacityRun(data["label"], plan, knee, provision, checks, latencies)


def save(run: CapacityRun, path: Path) -> None:
    path.write_text(json.dumps(to_json(run), indent=1) + "\n", encoding="utf-8")
