"""A capacity run as data: status, knee, curve, sizing, cross-checks and provenance; its JSON (read
back by `compare` and the weekly job).

Every result says where it came from: when, against what (target, model, engine version), with which
runner, workload and servescope version. `compare` refuses two runs that differ where a comparison
would measure the difference rather than the engine.
"""

from __future__ import annotations

import datetime
import json
import math
import platform
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from servescope import __version__
from servescope.kit.capacity.estimate import curve
from servescope.kit.capacity.search import Knee, SearchPlan
from servescope.kit.capacity.sizing import CrossCheck, Provision, cross_check
from servescope.kit.capacity.steps import Slo, StepSummary, observations

KIND = "servescope-capacity"
SCHEMA = 2
MAX_JSON_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a run came from."""

    target: str  # the URL loaded, or "simulated"
    runner: str  # http, locust or simulated
    model: str = ""
    engine_version: str = "unknown"
    workload: dict[str, Any] = field(default_factory=dict)
    started: str = ""  # UTC, ISO 8601
    servescope_version: str = __version__
    host: str = field(default_factory=platform.node)
    calibration: str = ""  # the client's ceiling line, when measured

    @staticmethod
    def now() -> str:
        return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


@dataclass(slots=True)
class CapacityRun:
    """What one `servescope capacity run` measured, for one engine configuration."""

    label: str
    plan: SearchPlan
    knee: Knee
    provision: Provision | None = None
    cross_checks: list[CrossCheck] = field(default_factory=list)
    # (offered, seed) -> the first SLO's observations of each independent part of that step, in the
    # order the requests were due: what compare tests.
    latencies: dict[tuple[float, int], list[list[float]]] = field(default_factory=dict)
    provenance: Provenance = field(default_factory=lambda: Provenance("unknown", "unknown"))

    @property
    def steps(self) -> list[StepSummary]:
        return curve(self.knee.steps)

    @property
    def status_line(self) -> str:
        return self.knee.message or self.knee.status


def build_run(
    label: str,
    plan: SearchPlan,
    knee: Knee,
    provision: Provision | None,
    provenance: Provenance | None = None,
) -> CapacityRun:
    """Collect a run's cross-checks and per-request latencies from the knee's raw steps; the plan
    records the probe rate the search measured."""
    metric = plan.slos[0].metric
    if knee.probe_qps is not None:
        plan = replace(plan, probe_qps=knee.probe_qps)
    checks = [check for step in knee.raw if (check := cross_check(step)) is not None]
    latencies: dict[tuple[float, int], list[list[float]]] = {}
    for summary, step in zip(knee.steps, knee.raw, strict=True):
        parts = latencies.setdefault((summary.offered, summary.seed), [])
        parts.extend(observations(part, metric) for part in step.split())
    return CapacityRun(
        label, plan, knee, provision, checks, latencies, provenance or Provenance("unknown", "unknown")
    )


def to_json(run: CapacityRun) -> dict[str, Any]:
    """The run as JSON-ready data; infinite values (never finished, no bound) become null."""
    knee = run.knee
    return {
        "kind": KIND,
        "schema": SCHEMA,
        "status": knee.status,
        "message": run.status_line,
        "label": run.label,
        "provenance": asdict(run.provenance),
        "plan": asdict(run.plan),
        "knee": _finite(
            {
                "estimate": knee.estimate,
                "lower": knee.lower,
                "upper": knee.upper,
                "repeats": knee.repeats,
                "pruned": knee.pruned,
                "pruned_by": knee.pruned_by,
                "reached_max": knee.reached_max,
                "client_bound_above": knee.client_bound_above,
                "probe_qps": knee.probe_qps,
            }
        ),
        "steps": [_finite(asdict(step)) for step in run.steps],
        "provision": None if run.provision is None else asdict(run.provision),
        "cross_checks": [_finite(asdict(check)) for check in run.cross_checks],
        "latencies": [
            {"offered": offered, "seed": seed, "parts": [[_finite(v) for v in part] for part in parts]}
            for (offered, seed), parts in sorted(run.latencies.items())
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
        if not isinstance(data, dict) or data.get("kind") != KIND:
            raise ValueError(f"{path}: not a servescope capacity result")
        if data.get("schema") != SCHEMA:
            raise ValueError(
                f"{path}: written by another servescope version (schema {data.get('schema')!r}, not "
                f"{SCHEMA}): measure it again"
            )
        return _from_json(data)
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: cannot read a capacity result: {err}") from err


def _step(data: dict[str, Any]) -> StepSummary:
    data["percentiles"] = {name: _inf(v) for name, v in data["percentiles"].items()}
    data["intervals"] = {
        key: (-math.inf if low is None else low, _inf(high)) for key, (low, high) in data["intervals"].items()
    }
    data["mean_running"] = math.nan if data["mean_running"] is None else data["mean_running"]
    return StepSummary(**data)


def _from_json(data: dict[str, Any]) -> CapacityRun:
    plan_data = dict(data["plan"])
    plan_data["slos"] = tuple(Slo(**slo) for slo in plan_data["slos"])
    plan = SearchPlan(**plan_data)
    k = data["knee"]
    knee = Knee(
        data["status"],
        k["estimate"],
        k["lower"],
        _inf(k["upper"]),
        [tuple(pair) for pair in k["repeats"]],
        [_step(step) for step in data["steps"]],
        pruned=k["pruned"],
        reached_max=k["reached_max"],
        message=data["message"],
        client_bound_above=k["client_bound_above"],
        pruned_by=k["pruned_by"],
        probe_qps=k["probe_qps"],
    )
    latencies = {
        (float(item["offered"]), int(item["seed"])): [[_inf(v) for v in part] for part in item["parts"]]
        for item in data["latencies"]
    }
    provision = None if data["provision"] is None else Provision(**data["provision"])
    checks = [
        CrossCheck(**{**c, "client_p99": _inf(c["client_p99"]), "engine_high": _inf(c["engine_high"])})
        for c in data["cross_checks"]
    ]
    provenance = Provenance(**data["provenance"])
    return CapacityRun(data["label"], plan, knee, provision, checks, latencies, provenance)


def save(run: CapacityRun, path: Path) -> None:
    path.write_text(json.dumps(to_json(run), indent=1) + "\n", encoding="utf-8")
