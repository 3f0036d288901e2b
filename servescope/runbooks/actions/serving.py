"""Read actions about serving engines, from the exporter: engine snapshot and batch-size advice."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from servescope.core.batch_controller import (
    DEFAULT_LOW_UTILISATION,
    DEFAULT_SLO_SECONDS,
    GPU_UNDERUTILISED,
    LATENCY_OVER_SLO,
    NO_TRAFFIC,
    WITHIN_SLO,
    p99_from_deltas,
)
from servescope.core.config import AlertsConfig
from servescope.runbooks.actions.base import ActionError, RunContext, StepResult, action
from servescope.runbooks.actions.metrics import Metrics, scrape
from servescope.runbooks.actions.params import HttpUrl, ModelName, Params
from servescope.runbooks.actions.text import duration, number, percent

_SNAPSHOT_GAUGES = (
    "requests_running",
    "requests_waiting",
    "kv_cache_usage_ratio",
    "kv_cache_capacity_tokens",
    "kv_cache_free_tokens",
    "kv_cache_free_requests",
    "kv_cache_saturation_seconds",
    "preemptions_total",
    "gpu_memory_utilization_ratio",
)


class EngineParams(Params):
    """Which engines: those at `endpoint`, those serving `model_name`, both filters, or every engine."""

    endpoint: HttpUrl | None = None
    model_name: ModelName | None = None


@dataclass(frozen=True, slots=True)
class Engine:
    """One engine as its serving series name it; `match` selects its series on another page."""

    model_name: str
    engine: str
    endpoint: str

    @property
    def match(self) -> dict[str, str]:
        return {"model_name": self.model_name, "engine": self.engine, "endpoint": self.endpoint}


def _same_endpoint(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def engines(metrics: Metrics, params: EngineParams) -> list[Engine]:
    found = sorted(
        {
            Engine(s.labels.get("model_name", ""), s.labels.get("engine", ""), s.labels.get("endpoint", ""))
            for name in ("servescope_serving_kv_cache_usage_ratio", "servescope_serving_requests_running")
            for s in metrics.get(name)
        },
        key=lambda e: (e.model_name, e.endpoint, e.engine),
    )
    chosen = [
        e
        for e in found
        if (params.endpoint is None or _same_endpoint(e.endpoint, params.endpoint))
        and (params.model_name is None or e.model_name == params.model_name)
    ]
    if not chosen:
        wanted = " and ".join(
            f"{k} {v!r}" for k, v in (("endpoint", params.endpoint), ("model_name", params.model_name)) if v
        )
        known = "; ".join(f"{e.model_name} at {e.endpoint}" for e in found) or "none"
        raise ActionError(
            f"no serving engine with {wanted or 'any labels'} on this exporter (engines: {known})"
        )
    return chosen


def _gpus(metrics: Metrics, engine: Engine) -> list[dict[str, str]]:
    return [
        {"gpu": s.labels.get("gpu", ""), "uuid": s.labels.get("uuid", ""), "pid": s.labels.get("pid", "")}
        for s in metrics.get("servescope_engine_gpu_info", **engine.match)
    ]


def _recommendation(metrics: Metrics, engine: Engine) -> tuple[float | None, str | None]:
    found = metrics.get("servescope_serving_recommended_max_num_seqs", **engine.match)
    return (found[0].value, found[0].labels.get("reason")) if found else (None, None)


def _per_engine(
    params: EngineParams,
    ctx: RunContext,
    report: Callable[[Metrics, Engine], tuple[dict[str, Any], list[str]]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """`report(metrics, engine)` for each chosen engine: their data, and their lines one after the other."""
    metrics = scrape(ctx)
    reports: list[dict[str, Any]] = []
    lines: list[str] = []
    for engine in engines(metrics, params):
        data, text = report(metrics, engine)
        reports.append(data)
        lines += text
    return reports, lines


def _snapshot(metrics: Metrics, engine: Engine) -> dict[str, Any]:
    def value(name: str) -> float | None:
        return metrics.value(f"servescope_serving_{name}", **engine.match)

    recommended, reason = _recommendation(metrics, engine)
    return {
        **engine.match,
        **{name: value(name) for name in _SNAPSHOT_GAUGES},
        "memory_over_budget_bytes": {
            s.labels.get("gpu", ""): s.value
            for s in metrics.get("servescope_serving_memory_over_budget_bytes", **engine.match)
        },
        "recommended_max_num_seqs": recommended,
        "recommended_reason": reason,
        "gpus": _gpus(metrics, engine),
    }


def _warnings(report: dict[str, Any], alerts: AlertsConfig) -> list[str]:
    kv, running, waiting = (
        report["kv_cache_usage_ratio"],
        report["requests_running"],
        report["requests_waiting"],
    )
    warnings = []
    # ServescopeKvCachePressure's bound: above it the operators start OOM prevention.
    if kv is not None and kv > alerts.kv_pressure_ratio:
        warnings.append(f"KV cache over {percent(alerts.kv_pressure_ratio)}: start OOM prevention")
    if waiting and running is not None and waiting > max(running, 5):
        warnings.append("more requests wait than run: the queue is building")
    if any(v > 2**30 for v in report["memory_over_budget_bytes"].values()):
        warnings.append("memory held outside the engine's budget (> 1 GiB): see the memory curve")
    return [f"  ! {w}" for w in warnings]


def _snapshot_report(metrics: Metrics, engine: Engine) -> tuple[dict[str, Any], list[str]]:
    report = _snapshot(metrics, engine)
    over_budget = report["memory_over_budget_bytes"]
    free_requests = report["kv_cache_free_requests"]
    lines = [
        f"{engine.model_name} engine {engine.engine} at {engine.endpoint} "
        f"(GPUs {', '.join(g['gpu'] for g in report['gpus']) or 'not joined'})",
        f"  running {number(report['requests_running'])}, waiting {number(report['requests_waiting'])}, "
        f"preemptions since start {number(report['preemptions_total'])}",
        f"  KV cache {percent(report['kv_cache_usage_ratio'])} used of "
        f"{number(report['kv_cache_capacity_tokens'])} tokens; "
        f"free {number(report['kv_cache_free_tokens'])} tokens"
        + (f" (~{number(free_requests)} max-length requests)" if free_requests is not None else "")
        + f"; full in {duration(report['kv_cache_saturation_seconds'])}",
        "  memory over budget: "
        + (", ".join(f"GPU {g} {v / 2**30:+.2f} GiB" for g, v in sorted(over_budget.items())) or "-"),
        f"  recommended max_num_seqs {number(report['recommended_max_num_seqs'])} "
        f"({report['recommended_reason'] or 'no advice yet'})",
    ]
    return report, lines


@action("serving_snapshot", "read", EngineParams)
def serving_snapshot(params: EngineParams, ctx: RunContext) -> StepResult:
    """The engines' batch, queue, KV cache, preemptions and batch advice now."""

    def report(metrics: Metrics, engine: Engine) -> tuple[dict[str, Any], list[str]]:
        data, lines = _snapshot_report(metrics, engine)
        return data, lines + _warnings(data, ctx.alerts)

    reports, lines = _per_engine(params, ctx, report)
    return StepResult(ok=True, title="Serving engines", output="\n".join(lines), data={"engines": reports})


_RULES = {
    LATENCY_OVER_SLO: "P99 latency over the SLO in the last window: batch x0.8, rounded down (floor 1)",
    GPU_UNDERUTILISED: "P99 within the SLO and the engine's GPUs under the low-utilisation threshold: "
    "batch x1.2, rounded up (capped at the maximum)",
    WITHIN_SLO: "P99 within the SLO and the GPUs busy enough: keep the batch",
    NO_TRAFFIC: "no request finished in the window: keep the batch",
}


def _buckets(metrics: Metrics, name: str, engine: Engine) -> dict[str, float]:
    return {s.labels.get("le", ""): s.value for s in metrics.get(f"{name}_bucket", **engine.match)}


def _p99(metrics: Metrics, engine: Engine) -> dict[str, float | None]:
    p99: dict[str, float | None] = {}
    for short, name in (
        ("ttft", "servescope_serving_time_to_first_token_seconds"),
        ("e2e", "servescope_serving_e2e_request_latency_seconds"),
    ):
        buckets = _buckets(metrics, name, engine)
        try:
            p99[short] = p99_from_deltas({}, buckets) if buckets else None
        except ValueError:
            p99[short] = None
    return p99


def _advice(metrics: Metrics, engine: Engine) -> dict[str, Any]:
    recommended, reason = _recommendation(metrics, engine)
    gpus = _gpus(metrics, engine)
    utilisation = [
        s.value
        for g in gpus
        for s in metrics.get("servescope_gpu_utilization_ratio", gpu=g["gpu"], uuid=g["uuid"])
    ]
    return {
        **engine.match,
        "recommended_max_num_seqs": recommended,
        "reason": reason,
        "rule": _RULES.get(reason or "", "no recommendation exported yet"),
        "p99_since_start_seconds": _p99(metrics, engine),
        "gpu_utilization_ratio": sum(utilisation) / len(utilisation) if utilisation else None,
        "gpus": gpus,
        "requests_running": metrics.value("servescope_serving_requests_running", **engine.match),
        "requests_waiting": metrics.value("servescope_serving_requests_waiting", **engine.match),
    }


def _advice_report(metrics: Metrics, engine: Engine) -> tuple[dict[str, Any], list[str]]:
    item = _advice(metrics, engine)
    reason = item["reason"]
    p99 = item["p99_since_start_seconds"]
    p99_text = ", ".join(f"{k} {'-' if v is None else f'{v * 1000:.0f} ms'}" for k, v in p99.items())
    lines = [
        f"{engine.model_name} engine {engine.engine} at {engine.endpoint}",
        f"  recommended max_num_seqs: {number(item['recommended_max_num_seqs'])}"
        + (f" (reason {reason}: {item['rule']})" if reason else " (no recommendation exported yet)"),
        f"  inputs: P99 since the engine started {p99_text} (the advisor uses the last window's P99); "
        f"GPU utilisation {percent(item['gpu_utilization_ratio'])} over GPUs "
        f"{', '.join(g['gpu'] for g in item['gpus']) or '(not joined: only the latency rule acts)'}",
        f"  running {number(item['requests_running'])}, waiting {number(item['requests_waiting'])}",
    ]
    return item, lines


@action("batch_size_advice", "read", EngineParams)
def batch_size_advice(params: EngineParams, ctx: RunContext) -> StepResult:
    """The exporter's max_num_seqs recommendation, its inputs (P99, GPU utilisation) and the rule applied."""
    advice, lines = _per_engine(params, ctx, _advice_report)
    lines.append(
        f"  the rule (defaults): P99 over {DEFAULT_SLO_SECONDS * 1000:.0f} ms -> x0.8; utilisation under "
        f"{percent(DEFAULT_LOW_UTILISATION)} -> x1.2; else keep. Lowering the batch acts immediately "
        "(a restart with --max-num-seqs); servescope only recommends and never changes an engine."
    )
    return StepResult(ok=True, title="Batch-size advice", output="\n".join(lines), data={"engines": advice})
