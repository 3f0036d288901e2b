"""`process_list`: the compute processes on a GPU, their memory, peaks, growth and the engine each serves."""

from __future__ import annotations

from typing import Any

from servescope.runbooks.actions.base import ActionError, RunContext, StepResult, action
from servescope.runbooks.actions.gpu import GpuParams
from servescope.runbooks.actions.metrics import Gpu, Metrics, get_json, gpu_api, scrape_gpu
from servescope.runbooks.actions.text import gib, mib_per_min, table

_GROWTH = "servescope_gpu_process_memory_growth_bytes_per_second"
_HEADERS = ["pid", "used", "peak 10m", "growth 5m", "growth 30m", "leak", "engine"]


def _api_peaks(ctx: RunContext, gpu: Gpu) -> dict[str, Any]:
    """Each pid's 10-minute peak from the exporter's 1 s history, when it has one."""
    try:
        memory = get_json(ctx, gpu_api(gpu.index, "memory"), {"window": "10m"})
    except ActionError:
        memory = {}  # no 1 s history (derived source off, or too young): the /metrics peaks remain
    return {str(proc.get("pid")): proc.get("peak_bytes") for proc in memory.get("processes", [])}


def _process(metrics: Metrics, gpu: Gpu, pid: str, used: float, engine: dict[str, str]) -> dict[str, Any]:
    def of_pid(name: str, **match: str) -> float | None:
        found = [s for s in metrics.on_gpu(name, gpu) if s.labels.get("pid") == pid]
        found = [s for s in found if all(s.labels.get(k) == v for k, v in match.items())]
        return found[0].value if found else None

    return {
        "pid": pid,
        "memory_used_bytes": used,
        "peak_bytes": of_pid("servescope_gpu_process_memory_used_peak_bytes"),
        "peak_10m_bytes": None,  # from the 1 s history, filled in by the caller
        "growth_5m_bytes_per_second": of_pid(_GROWTH, window="5m"),
        "growth_30m_bytes_per_second": of_pid(_GROWTH, window="30m"),
        "leak_suspected": of_pid("servescope_gpu_process_memory_leak_suspected"),
        "model_name": engine.get("model_name"),
        "endpoint": engine.get("endpoint"),
    }


def _row(process: dict[str, Any]) -> list[str]:
    peak = process["peak_10m_bytes"] if process["peak_10m_bytes"] is not None else process["peak_bytes"]
    return [
        process["pid"],
        gib(process["memory_used_bytes"]),
        gib(peak),
        mib_per_min(process["growth_5m_bytes_per_second"]),
        mib_per_min(process["growth_30m_bytes_per_second"]),
        {None: "-", 0.0: "no", 1.0: "YES"}.get(process["leak_suspected"], "?"),
        f"{process['model_name']} {process['endpoint']}" if process["model_name"] else "(not a known engine)",
    ]


@action("process_list", "read", GpuParams)
def process_list(params: GpuParams, ctx: RunContext) -> StepResult:
    """The compute processes on the GPU, their memory, peaks, growth and the engine each serves."""
    metrics, gpu = scrape_gpu(ctx, params.gpu)
    engines = {
        s.labels.get("pid", ""): s.labels
        for s in metrics.get("servescope_engine_gpu_info", gpu=gpu.index)
        if not gpu.uuid or s.labels.get("uuid") == gpu.uuid
    }
    peaks = _api_peaks(ctx, gpu)
    processes = []
    for sample in metrics.on_gpu("servescope_gpu_process_memory_used_bytes", gpu):
        pid = sample.labels.get("pid", "")
        process = _process(metrics, gpu, pid, sample.value, engines.get(pid, {}))
        processes.append({**process, "peak_10m_bytes": peaks.get(pid)})
    total = metrics.gpu_value("servescope_gpu_memory_total_bytes", gpu)
    head = f"GPU {gpu.index} ({gpu.uuid}): {len(processes)} compute process(es), memory total {gib(total)}"
    body = table(_HEADERS, [_row(p) for p in processes]) if processes else ""
    return StepResult(
        ok=True,
        title=f"Processes on GPU {gpu.index}",
        output=head + ("\n" + body if body else "\n  no compute process on this GPU"),
        data={"gpu": gpu.index, "uuid": gpu.uuid, "processes": processes},
    )
