"""Read actions about one GPU, from the exporter: its snapshot now, and its memory curve."""

from __future__ import annotations

from typing import Any

from servescope.runbooks.actions.base import ActionError, RunContext, StepResult, action
from servescope.runbooks.actions.metrics import Gpu, Metrics, get_json, get_text, gpu_api, scrape_gpu
from servescope.runbooks.actions.params import GpuRef, Params, Window, window_seconds
from servescope.runbooks.actions.text import duration, gib, mib_per_min, number, percent

# The series of /metrics a snapshot shows, by the name it carries in the step's data.
_GAUGES = (
    "up",
    "utilization_ratio",
    "memory_utilization_ratio",
    "memory_used_bytes",
    "memory_free_bytes",
    "memory_total_bytes",
    "memory_reserved_bytes",
    "temperature_celsius",
    "power_watts",
    "power_limit_watts",
)
_STATES = {1: "UP", 0: "DOWN (lost, reset required or gone from the bus)"}


class GpuParams(Params):
    gpu: GpuRef


class MemoryCurveParams(Params):
    gpu: GpuRef
    window: Window = "30m"


def _gpu_summary(ctx: RunContext, gpu: Gpu) -> dict[str, Any] | None:
    """This GPU's entry of /api/v1/gpus (growth, time to exhaustion, leak verdict), when served."""
    try:
        answer = get_json(ctx, "/api/v1/gpus")
    except ActionError:
        return None  # an exporter without the derived source: the snapshot stands without it
    for entry in answer.get("gpus", []):
        if entry.get("gpu") == gpu.index:
            return dict(entry)
    return None


def _labelled(metrics: Metrics, name: str, gpu: Gpu, label: str) -> dict[str, float]:
    return {s.labels.get(label, ""): s.value for s in metrics.on_gpu(name, gpu)}


def _snapshot_data(metrics: Metrics, gpu: Gpu, ctx: RunContext) -> dict[str, Any]:
    def value(name: str) -> float | None:
        return metrics.gpu_value(f"servescope_gpu_{name}", gpu)

    reasons = _labelled(metrics, "servescope_gpu_clock_event_reason_active", gpu, "reason")
    return {
        "gpu": gpu.index,
        "uuid": gpu.uuid,
        "hostname": gpu.hostname,
        "gpu_model": gpu.model,
        **{name: value(name) for name in _GAUGES},
        "clocks_hertz": _labelled(metrics, "servescope_gpu_clock_hertz", gpu, "clock"),
        "clock_event_reasons_active": sorted(r for r, v in reasons.items() if v),
        "pcie_replay_errors_total": value("pcie_replay_errors_total"),
        "ecc_errors_total": {
            f"{s.labels.get('type')}/{s.labels.get('scope')}": s.value
            for s in metrics.on_gpu("servescope_gpu_ecc_errors_total", gpu)
        },
        "remapped_rows": _labelled(metrics, "servescope_gpu_remapped_rows", gpu, "type"),
        "remapped_rows_pending": value("remapped_rows_pending"),
        "remapped_rows_failed": value("remapped_rows_failed"),
        "xid_errors_total": _labelled(metrics, "servescope_gpu_xid_errors_total", gpu, "xid"),
        "compute_processes": value("compute_processes"),
        "memory_summary": _gpu_summary(ctx, gpu),
    }


def _snapshot_lines(gpu: Gpu, data: dict[str, Any]) -> list[str]:
    used, total = data["memory_used_bytes"], data["memory_total_bytes"]
    clocks, ecc, xids = data["clocks_hertz"], data["ecc_errors_total"], data["xid_errors_total"]
    lines = [
        f"GPU {gpu.index} ({gpu.uuid}) {gpu.model} on {gpu.hostname}: "
        + _STATES.get(data["up"], "no up series"),
        f"  utilisation {percent(data['utilization_ratio'])}, memory bandwidth busy "
        f"{percent(data['memory_utilization_ratio'])}",
        f"  memory used {gib(used)} of {gib(total)}"
        + (f" ({percent(used / total)})" if used is not None and total else "")
        + f", free {gib(data['memory_free_bytes'])}",
        f"  temperature {number(data['temperature_celsius'])} C, power {number(data['power_watts'])} W "
        f"of {number(data['power_limit_watts'])} W limit",
        "  clocks " + (", ".join(f"{k} {v / 1e6:.0f} MHz" for k, v in sorted(clocks.items())) or "-"),
        "  clocks held down by: " + (", ".join(data["clock_event_reasons_active"]) or "nothing"),
        f"  PCIe replays {number(data['pcie_replay_errors_total'])}; ECC "
        + (", ".join(f"{k} {number(v)}" for k, v in sorted(ecc.items())) or "-"),
        f"  remapped rows {data['remapped_rows'] or '-'}, pending {number(data['remapped_rows_pending'])}, "
        f"failed {number(data['remapped_rows_failed'])}",
        "  XID events since the exporter started: "
        + (", ".join(f"XID {k}: {number(v)}" for k, v in sorted(xids.items())) or "none"),
        f"  compute processes {number(data['compute_processes'])}",
    ]
    if data["memory_summary"]:
        lines.append(summary_line(data["memory_summary"]))
    return lines


@action("gpu_snapshot", "read", GpuParams)
def gpu_snapshot(params: GpuParams, ctx: RunContext) -> StepResult:
    """The GPU's state now: utilisation, memory, temperature, power, clocks and throttling, health."""
    metrics, gpu = scrape_gpu(ctx, params.gpu)
    data = _snapshot_data(metrics, gpu, ctx)
    output = "\n".join(_snapshot_lines(gpu, data))
    return StepResult(ok=True, title=f"GPU {gpu.index} snapshot", output=output, data=data)


def summary_line(summary: dict[str, Any]) -> str:
    """Growth per window, time to exhaustion and the leak verdict of /api/v1/gpus, on one line."""
    growth = summary.get("growth_bytes_per_second") or {}
    left = summary.get("seconds_to_exhaustion") or {}
    leak = summary.get("leak") or {}
    parts = [f"{w}: {mib_per_min(g)}, full in {duration(left.get(w))}" for w, g in sorted(growth.items())]
    return (
        "  memory trend "
        + ("; ".join(parts) or "not enough history yet")
        + f"; leak suspected: {'YES' if leak.get('suspected') else 'no'} ({leak.get('reason', '-')})"
    )


@action("memory_curve", "read", MemoryCurveParams)
def memory_curve(params: MemoryCurveParams, ctx: RunContext) -> StepResult:
    """The GPU's 1 s memory curve over the window: growth, time to exhaustion, leak verdict, and the SVG."""
    _, gpu = scrape_gpu(ctx, params.gpu)
    seconds = window_seconds(params.window)
    # The exporter takes 90s/10m/1h or plain seconds.
    window = params.window if params.window[-1] in "smh" else str(seconds)
    path = gpu_api(gpu.index, "memory")
    answer = get_json(ctx, path, {"window": window})
    svg = get_text(ctx, path + ".svg", {"window": window})
    samples = answer.pop("samples", [])
    processes = [
        {"pid": p.get("pid"), "peak_bytes": p.get("peak_bytes"), "samples": len(p.get("samples", []))}
        for p in answer.pop("processes", [])
    ]
    values = [v for _, v in samples]
    data = {
        **answer,
        "samples": len(samples),
        "first_bytes": values[0] if values else None,
        "last_bytes": values[-1] if values else None,
        "min_bytes": min(values) if values else None,
        "max_bytes": max(values) if values else None,
        "processes": processes,
    }
    used, capacity = answer.get("used_bytes"), answer.get("capacity_bytes")
    lines = [
        f"GPU {gpu.index} ({gpu.uuid}) memory over the last {params.window} "
        f"({len(samples)} samples of 1 s, history {number(answer.get('history_seconds'))} s)",
        f"  used now {gib(used)} of {gib(capacity)} usable"
        + (f" ({percent(used / capacity)})" if used is not None and capacity else ""),
        f"  in the window: min {gib(data['min_bytes'])}, max {gib(data['max_bytes'])}",
        summary_line(answer),
        f"  SVG: {len(svg)} bytes (the memory curve with its trend and capacity lines)",
    ]
    return StepResult(
        ok=True, title=f"Memory curve of GPU {gpu.index}", output="\n".join(lines), data=data, svg=svg
    )
