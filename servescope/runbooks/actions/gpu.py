"""Read actions about GPUs, from the exporter: snapshot, processes, memory curve, NVLink, capacity."""

from __future__ import annotations

import math
from typing import Any

from servescope.runbooks.actions.base import (
    ActionError,
    GpuRef,
    NoParams,
    Params,
    RunContext,
    StepResult,
    Window,
    action,
    duration,
    gib,
    mib_per_min,
    number,
    percent,
    table,
    window_seconds,
)
from servescope.runbooks.actions.metrics import (
    Gpu,
    Metrics,
    find_gpu,
    get_json,
    get_text,
    gpu_path,
    gpu_series,
    gpu_value,
    scrape,
)

SPARE_BUFFER = 0.2  # the operators keep 20% of the fleet's GPU capacity spare for bursts


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
    return {s.labels.get(label, ""): s.value for s in gpu_series(metrics, name, gpu)}


@action("gpu_snapshot", "read", GpuParams)
def gpu_snapshot(params: GpuParams, ctx: RunContext) -> StepResult:
    """The GPU's state now: utilisation, memory, temperature, power, clocks and throttling, health."""
    metrics = scrape(ctx)
    gpu = find_gpu(metrics, params.gpu)

    def value(name: str) -> float | None:
        return gpu_value(metrics, f"servescope_gpu_{name}", gpu)

    throttles = sorted(
        r
        for r, v in _labelled(metrics, "servescope_gpu_clock_event_reason_active", gpu, "reason").items()
        if v
    )
    ecc = {
        f"{s.labels.get('type')}/{s.labels.get('scope')}": s.value
        for s in gpu_series(metrics, "servescope_gpu_ecc_errors_total", gpu)
    }
    xids = _labelled(metrics, "servescope_gpu_xid_errors_total", gpu, "xid")
    data: dict[str, Any] = {
        "gpu": gpu.index,
        "uuid": gpu.uuid,
        "hostname": gpu.hostname,
        "gpu_model": gpu.model,
        "up": value("up"),
        "utilization_ratio": value("utilization_ratio"),
        "memory_utilization_ratio": value("memory_utilization_ratio"),
        "memory_used_bytes": value("memory_used_bytes"),
        "memory_free_bytes": value("memory_free_bytes"),
        "memory_total_bytes": value("memory_total_bytes"),
        "memory_reserved_bytes": value("memory_reserved_bytes"),
        "temperature_celsius": value("temperature_celsius"),
        "power_watts": value("power_watts"),
        "power_limit_watts": value("power_limit_watts"),
        "clocks_hertz": _labelled(metrics, "servescope_gpu_clock_hertz", gpu, "clock"),
        "clock_event_reasons_active": throttles,
        "pcie_replay_errors_total": value("pcie_replay_errors_total"),
        "ecc_errors_total": ecc,
        "remapped_rows": _labelled(metrics, "servescope_gpu_remapped_rows", gpu, "type"),
        "remapped_rows_pending": value("remapped_rows_pending"),
        "remapped_rows_failed": value("remapped_rows_failed"),
        "xid_errors_total": xids,
        "compute_processes": value("compute_processes"),
        "memory_summary": _gpu_summary(ctx, gpu),
    }
    up = data["up"]
    used, total = data["memory_used_bytes"], data["memory_total_bytes"]
    clocks = data["clocks_hertz"]
    lines = [
        f"GPU {gpu.index} ({gpu.uuid}) {gpu.model} on {gpu.hostname}: "
        + (
            "UP"
            if up == 1
            else "DOWN (lost, reset required or gone from the bus)"
            if up == 0
            else "no up series"
        ),
        f"  utilisation {percent(data['utilization_ratio'])}, memory bandwidth busy "
        f"{percent(data['memory_utilization_ratio'])}",
        f"  memory used {gib(used)} of {gib(total)}"
        + (f" ({percent(used / total)})" if used is not None and total else "")
        + f", free {gib(data['memory_free_bytes'])}",
        f"  temperature {number(data['temperature_celsius'])} C, power {number(data['power_watts'])} W "
        f"of {number(data['power_limit_watts'])} W limit",
        "  clocks " + (", ".join(f"{k} {v / 1e6:.0f} MHz" for k, v in sorted(clocks.items())) or "-"),
        "  clocks held down by: " + (", ".join(throttles) or "nothing"),
        f"  PCIe replays {number(data['pcie_replay_errors_total'])}; ECC "
        + (", ".join(f"{k} {number(v)}" for k, v in sorted(ecc.items())) or "-"),
        f"  remapped rows {data['remapped_rows'] or '-'}, pending {number(data['remapped_rows_pending'])}, "
        f"failed {number(data['remapped_rows_failed'])}",
        "  XID events since the exporter started: "
        + (", ".join(f"XID {k}: {number(v)}" for k, v in sorted(xids.items())) or "none"),
        f"  compute processes {number(data['compute_processes'])}",
    ]
    summary = data["memory_summary"]
    if summary:
        lines.append(_summary_line(summary))
    return StepResult(ok=True, title=f"GPU {gpu.index} snapshot", output="\n".join(lines), data=data)


def _summary_line(summary: dict[str, Any]) -> str:
    growth = summary.get("growth_bytes_per_second") or {}
    left = summary.get("seconds_to_exhaustion") or {}
    leak = summary.get("leak") or {}
    parts = [f"{w}: {mib_per_min(g)}, full in {duration(left.get(w))}" for w, g in sorted(growth.items())]
    return (
        "  memory trend "
        + ("; ".join(parts) or "not enough history yet")
        + f"; leak suspected: {'YES' if leak.get('suspected') else 'no'} ({leak.get('reason', '-')})"
    )


@action("process_list", "read", GpuParams)
def process_list(params: GpuParams, ctx: RunContext) -> StepResult:
    """The compute processes on the GPU, their memory, peaks, growth and the engine each serves."""
    metrics = scrape(ctx)
    gpu = find_gpu(metrics, params.gpu)
    engines = {
        s.labels.get("pid", ""): s.labels
        for s in metrics.get("servescope_engine_gpu_info", gpu=gpu.index)
        if not gpu.uuid or s.labels.get("uuid") == gpu.uuid
    }
    api_peaks: dict[str, Any] = {}
    try:
        memory = get_json(ctx, f"/api/v1/gpus/{gpu_path(gpu.index)}/memory", {"window": "10m"})
    except ActionError:
        memory = {}  # no 1 s history (derived source off, or too young): the /metrics peaks remain
    for proc in memory.get("processes", []):
        api_peaks[str(proc.get("pid"))] = proc.get("peak_bytes")
    processes: list[dict[str, Any]] = []
    for sample in gpu_series(metrics, "servescope_gpu_process_memory_used_bytes", gpu):
        pid = sample.labels.get("pid", "")

        def of_pid(name: str, pid: str = pid, **match: str) -> float | None:
            found = [s for s in gpu_series(metrics, name, gpu) if s.labels.get("pid") == pid]
            found = [s for s in found if all(s.labels.get(k) == v for k, v in match.items())]
            return found[0].value if found else None

        engine = engines.get(pid, {})
        processes.append(
            {
                "pid": pid,
                "memory_used_bytes": sample.value,
                "peak_bytes": of_pid("servescope_gpu_process_memory_used_peak_bytes"),
                "peak_10m_bytes": api_peaks.get(pid),
                "growth_5m_bytes_per_second": of_pid(
                    "servescope_gpu_process_memory_growth_bytes_per_second", window="5m"
                ),
                "growth_30m_bytes_per_second": of_pid(
                    "servescope_gpu_process_memory_growth_bytes_per_second", window="30m"
                ),
                "leak_suspected": of_pid("servescope_gpu_process_memory_leak_suspected"),
                "model_name": engine.get("model_name"),
                "endpoint": engine.get("endpoint"),
            }
        )
    rows = [
        [
            p["pid"],
            gib(p["memory_used_bytes"]),
            gib(p["peak_10m_bytes"] if p["peak_10m_bytes"] is not None else p["peak_bytes"]),
            mib_per_min(p["growth_5m_bytes_per_second"]),
            mib_per_min(p["growth_30m_bytes_per_second"]),
            {None: "-", 0.0: "no", 1.0: "YES"}.get(p["leak_suspected"], "?"),
            f"{p['model_name']} {p['endpoint']}" if p["model_name"] else "(not a known engine)",
        ]
        for p in processes
    ]
    total = gpu_value(metrics, "servescope_gpu_memory_total_bytes", gpu)
    head = f"GPU {gpu.index} ({gpu.uuid}): {len(processes)} compute process(es), memory total {gib(total)}"
    body = (
        table(["pid", "used", "peak 10m", "growth 5m", "growth 30m", "leak", "engine"], rows) if rows else ""
    )
    return StepResult(
        ok=True,
        title=f"Processes on GPU {gpu.index}",
        output=head + ("\n" + body if body else "\n  no compute process on this GPU"),
        data={"gpu": gpu.index, "uuid": gpu.uuid, "processes": processes},
    )


@action("memory_curve", "read", MemoryCurveParams)
def memory_curve(params: MemoryCurveParams, ctx: RunContext) -> StepResult:
    """The GPU's 1 s memory curve over the window: growth, time to exhaustion, leak verdict, and the SVG."""
    metrics = scrape(ctx)
    gpu = find_gpu(metrics, params.gpu)
    seconds = window_seconds(params.window)
    # The exporter takes 90s/10m/1h or plain seconds.
    window = params.window if params.window[-1] in "smh" else str(seconds)
    path = f"/api/v1/gpus/{gpu_path(gpu.index)}/memory"
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
        _summary_line(answer),
        f"  SVG: {len(svg)} bytes (the memory curve with its trend and capacity lines)",
    ]
    return StepResult(
        ok=True, title=f"Memory curve of GPU {gpu.index}", output="\n".join(lines), data=data, svg=svg
    )


_NVLINK_TYPES = ("crc_flit", "crc_data", "replay", "recovery")
_STATES: dict[Any, str] = {1.0: "up", 0.0: "DOWN"}
_DCGM_NVLINK = (
    (409, "crc_flit", "servescope_dcgm_nvlink_crc_flit_errors_total"),
    (419, "crc_data", "servescope_dcgm_nvlink_crc_data_errors_total"),
    (429, "replay", "servescope_dcgm_nvlink_replay_errors_total"),
    (439, "recovery", "servescope_dcgm_nvlink_recovery_errors_total"),
)


@action("nvlink_errors", "read", GpuParams)
def nvlink_errors(params: GpuParams, ctx: RunContext) -> StepResult:
    """NVLink errors of the GPU per link and type (NVML) and DCGM's 409/419/429/439 counters."""
    metrics = scrape(ctx)
    gpu = find_gpu(metrics, params.gpu)
    links: dict[str, dict[str, Any]] = {}
    for sample in gpu_series(metrics, "servescope_gpu_nvlink_up", gpu):
        links.setdefault(sample.labels.get("link", "?"), {})["up"] = sample.value
    for sample in gpu_series(metrics, "servescope_gpu_nvlink_errors_total", gpu):
        links.setdefault(sample.labels.get("link", "?"), {})[sample.labels.get("type", "?")] = sample.value
    ordered = sorted(
        links.items(), key=lambda kv: (not kv[0].isdigit(), int(kv[0]) if kv[0].isdigit() else 0)
    )
    totals = {t: sum(v.get(t) or 0.0 for v in links.values()) for t in _NVLINK_TYPES}
    dcgm: dict[str, dict[str, Any]] = {
        str(field_id): {"type": kind, "value": gpu_value(metrics, name, gpu)}
        for field_id, kind, name in _DCGM_NVLINK
    }
    down = [link for link, v in ordered if v.get("up") == 0]
    with_errors = [link for link, v in ordered if any(v.get(t) for t in _NVLINK_TYPES)]
    rows = [
        [link, _STATES.get(v.get("up"), "-"), *(number(v.get(t)) for t in _NVLINK_TYPES)]
        for link, v in ordered
        if link in with_errors or link in down
    ]
    lines = [
        f"GPU {gpu.index} ({gpu.uuid}): {len(links)} NVLink link(s), {len(down)} down, "
        f"{len(with_errors)} with errors since the driver loaded",
        "  totals: " + ", ".join(f"{t} {number(totals[t])}" for t in _NVLINK_TYPES),
    ]
    if rows:
        lines.append(table(["link", "state", *_NVLINK_TYPES], rows))
    elif links:
        lines.append("  every link is up with no error counted")
    else:
        lines.append("  no NVLink series for this GPU (PCIe-only board, or NVLink not supported)")
    lines.append(
        "  DCGM: "
        + ", ".join(
            f"{fid} ({v['type']}) {number(v['value']) if v['value'] is not None else 'not exported'}"
            for fid, v in dcgm.items()
        )
    )
    lines.append(
        "  note: counters are totals; what matters is their increase (the alert counts 10 min). "
        "NVLink CRC errors are DCGM 409/419 (replay/recovery 429/439); 1009/1010 are PCIe bytes/s."
    )
    return StepResult(
        ok=True,
        title=f"NVLink errors of GPU {gpu.index}",
        output="\n".join(lines),
        data={
            "gpu": gpu.index,
            "uuid": gpu.uuid,
            "links": dict(ordered),
            "totals": totals,
            "links_down": down,
            "dcgm": dcgm,
        },
    )


@action("capacity_advice", "read", NoParams)
def capacity_advice(params: NoParams, ctx: RunContext) -> StepResult:
    """Utilisation of the exporter's GPUs and the spare capacity left against the 20% burst buffer."""
    metrics = scrape(ctx)
    up = {
        (s.labels.get("gpu"), s.labels.get("uuid")) for s in metrics.get("servescope_gpu_up") if s.value == 1
    }
    gpus: list[dict[str, Any]] = [
        {
            "gpu": s.labels.get("gpu"),
            "uuid": s.labels.get("uuid"),
            "hostname": s.labels.get("hostname"),
            "utilization_ratio": s.value,
        }
        for s in metrics.get("servescope_gpu_utilization_ratio")
        if (s.labels.get("gpu"), s.labels.get("uuid")) in up
    ]
    if not gpus:
        return StepResult(
            ok=False,
            title="Capacity",
            output="no GPU that is up reports utilisation on this exporter",
            data={"gpus": []},
        )
    total = sum(g["utilization_ratio"] for g in gpus)
    mean = total / len(gpus)
    spare = 1.0 - mean
    # GPUs needed so that the same load leaves the buffer spare: load / (1 - buffer).
    needed = max(0, math.ceil(total / (1.0 - SPARE_BUFFER) - 1e-9) - len(gpus))
    busiest = max(gpus, key=lambda g: g["utilization_ratio"])
    data = {
        "gpus": gpus,
        "gpu_count": len(gpus),
        "mean_utilization_ratio": mean,
        "spare_ratio": spare,
        "buffer_ratio": SPARE_BUFFER,
        "below_buffer": spare < SPARE_BUFFER,
        "additional_gpus_needed": needed,
        "busiest": busiest,
    }
    verdict = (
        f"BELOW the {percent(SPARE_BUFFER)} buffer: add about {needed} GPU(s) (workers take 3-5 min to come "
        "up) or shed load; lowering the batch size acts immediately but costs throughput"
        if spare < SPARE_BUFFER
        else f"within the {percent(SPARE_BUFFER)} buffer kept for bursts"
    )
    lines = [
        f"{len(gpus)} GPU(s) up on this exporter, mean utilisation {percent(mean)}, spare {percent(spare)}: "
        + verdict,
        f"  busiest: GPU {busiest['gpu']} on {busiest['hostname']} at "
        f"{percent(busiest['utilization_ratio'])}",
        table(
            ["gpu", "hostname", "utilisation"],
            [[str(g["gpu"]), str(g["hostname"]), percent(g["utilization_ratio"])] for g in gpus],
        ),
        "  note: one exporter sees one node; the fleet-wide figure is "
        "1 - avg(servescope_gpu_utilization_ratio) in Prometheus.",
    ]
    return StepResult(ok=True, title="Spare GPU capacity", output="\n".join(lines), data=data)
