"""`nvlink_errors`: NVLink errors of a GPU by type (NVML; per link where the exporter runs with
--nvlink-per-link), and DCGM's 409/419/429/439 counters."""

from __future__ import annotations

from typing import Any

from servescope.runbooks.actions.base import ActionError, RunContext, StepResult, action
from servescope.runbooks.actions.gpu import GpuParams
from servescope.runbooks.actions.metrics import Gpu, Metrics, get_json, gpu_api, scrape_gpu
from servescope.runbooks.actions.text import number, table

_NVLINK_TYPES = ("crc_flit", "crc_data", "replay", "recovery")
_STATES: dict[Any, str] = {1.0: "up", 0.0: "DOWN"}
_DCGM_NVLINK = (
    (409, "crc_flit", "servescope_dcgm_nvlink_crc_flit_errors_total"),
    (419, "crc_data", "servescope_dcgm_nvlink_crc_data_errors_total"),
    (429, "replay", "servescope_dcgm_nvlink_replay_errors_total"),
    (439, "recovery", "servescope_dcgm_nvlink_recovery_errors_total"),
)
_PER_LINK_OFF = (
    "  per link: this exporter has no NVLink API (an older version): run it with --nvlink-per-link"
)
_MAX_LINKS = 64  # NVML has 18; more in an answer is not believed
_NOTE = (
    "  note: counters are totals; what matters is their increase (the alert counts 10 min). "
    "NVLink CRC errors are DCGM 409/419 (replay/recovery 429/439); 1009/1010 are PCIe bytes/s."
)


def _links(metrics: Metrics, gpu: Gpu) -> list[tuple[str, dict[str, Any]]]:
    """Each link's state and error counts, in link order."""
    links: dict[str, dict[str, Any]] = {}
    for sample in metrics.on_gpu("servescope_gpu_nvlink_up", gpu):
        links.setdefault(sample.labels.get("link", "?"), {})["up"] = sample.value
    for sample in metrics.on_gpu("servescope_gpu_nvlink_link_errors_total", gpu):
        links.setdefault(sample.labels.get("link", "?"), {})[sample.labels.get("type", "?")] = sample.value
    return sorted(links.items(), key=lambda kv: (not kv[0].isdigit(), int(kv[0]) if kv[0].isdigit() else 0))


def _links_from_api(ctx: RunContext, gpu: Gpu) -> list[tuple[str, dict[str, Any]]] | None:
    """Per link from the exporter's GPU API, where the exposition sums over links; None without the API."""
    try:
        body = get_json(ctx, gpu_api(gpu.uuid or gpu.index, "nvlink"))
        links = [
            (str(int(entry["link"])), {"up": 1.0 if entry["up"] else 0.0, **_counts(entry["errors"])})
            for entry in body["links"][:_MAX_LINKS]
        ]
    except (ActionError, KeyError, TypeError, ValueError):
        return None
    return sorted(links, key=lambda kv: int(kv[0]))


def _counts(errors: dict[str, Any]) -> dict[str, float]:
    return {kind: float(errors[kind]) for kind in _NVLINK_TYPES if kind in errors}


def _total(metrics: Metrics, gpu: Gpu, kind: str) -> float | None:
    """NVML's count of one error type summed over the GPU's links (the exporter's per-GPU series)."""
    found = [
        s.value
        for s in metrics.on_gpu("servescope_gpu_nvlink_errors_total", gpu)
        if s.labels.get("type") == kind
    ]
    return sum(found) if found else None


def _link_lines(
    ordered: list[tuple[str, dict[str, Any]]], down: list[str], with_errors: list[str]
) -> list[str]:
    rows = [
        [link, _STATES.get(v.get("up"), "-"), *(number(v.get(t)) for t in _NVLINK_TYPES)]
        for link, v in ordered
        if link in with_errors or link in down
    ]
    if rows:
        return [table(["link", "state", *_NVLINK_TYPES], rows)]
    if ordered:
        return ["  every link is up with no error counted"]
    return ["  no NVLink series for this GPU (PCIe-only board, or NVLink not supported)"]


@action("nvlink_errors", "read", GpuParams)
def nvlink_errors(params: GpuParams, ctx: RunContext) -> StepResult:
    """NVLink errors of the GPU by type (NVML, per link where exported) and DCGM's 409/419/429/439."""
    metrics, gpu = scrape_gpu(ctx, params.gpu)
    links = metrics.gpu_value("servescope_gpu_nvlink_links", gpu)
    ordered = _links(metrics, gpu) or (_links_from_api(ctx, gpu) if links else []) or []
    totals = {t: _total(metrics, gpu, t) for t in _NVLINK_TYPES}
    dcgm: dict[str, dict[str, Any]] = {
        str(field_id): {"type": kind, "value": metrics.gpu_value(name, gpu)}
        for field_id, kind, name in _DCGM_NVLINK
    }
    down = [link for link, v in ordered if v.get("up") == 0]
    with_errors = [link for link, v in ordered if any(v.get(t) for t in _NVLINK_TYPES)]
    links_up = metrics.gpu_value("servescope_gpu_nvlink_links_up", gpu)
    lines = [
        f"GPU {gpu.index} ({gpu.uuid}): {number(links)} NVLink link(s), {number(links_up)} up"
        + (f", {len(with_errors)} with errors since the driver loaded" if ordered else ""),
        "  totals: " + ", ".join(f"{t} {number(totals[t])}" for t in _NVLINK_TYPES),
        *(_link_lines(ordered, down, with_errors) if ordered or not links else [_PER_LINK_OFF]),
        "  DCGM: "
        + ", ".join(
            f"{fid} ({v['type']}) {number(v['value']) if v['value'] is not None else 'not exported'}"
            for fid, v in dcgm.items()
        ),
        _NOTE,
    ]
    data: dict[str, Any] = {"gpu": gpu.index, "uuid": gpu.uuid, "links": dict(ordered), "totals": totals}
    data |= {"links_total": links, "links_up": links_up}
    return StepResult(
        ok=True,
        title=f"NVLink errors of GPU {gpu.index}",
        output="\n".join(lines),
        data={**data, "links_down": down, "dcgm": dcgm},
    )
