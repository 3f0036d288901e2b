"""`dcgm_sample`: a few rows of one GPU's DCGM fields (NVLink errors, PCIe and NVLink traffic), read from
the exporter of the alert's own node.

The exporter's DCGM source watches the fields on the node (`dcgmi dmon` or the GPU Operator's
dcgm-exporter); the step asks its read-only `/api/v1/gpus/<gpu>/dcgm` `count` times, a second apart, so
the runbook service's pod needs no DCGM of its own and no access to the node. A field is found by the
series the exporter's counters file names for it (the shipped `default-counters.csv`).
"""

from __future__ import annotations

import functools
import time
from typing import Annotated, Any

from pydantic import Field

from servescope.core.dcgm.counters import load_counters
from servescope.core.dcgm.field_table import KNOWN
from servescope.runbooks.actions.base import ActionError, RunContext, StepResult, action
from servescope.runbooks.actions.metrics import get_json, gpu_api
from servescope.runbooks.actions.params import GpuIndex, Params
from servescope.runbooks.actions.text import number, table

DEFAULT_FIELDS = [409, 419, 429, 439, 1009, 1010, 1011, 1012]
SAMPLE_SECONDS = 1.0
_MEANING = {
    409: "NVLink CRC flit errors",
    419: "NVLink CRC data errors",
    429: "NVLink replays",
    439: "NVLink recoveries",
    1009: "PCIe TX bytes/s",
    1010: "PCIe RX bytes/s",
    1011: "NVLink TX bytes/s",
    1012: "NVLink RX bytes/s",
}
_NOTE = (
    "note: 409/419 are NVLink CRC errors (429/439 replay/recovery); 1009/1010 are PCIe bytes per "
    "second, not errors. Error counters are totals: compare the first and last rows."
)


class DcgmSampleParams(Params):
    gpu: GpuIndex
    fields: Annotated[list[Annotated[int, Field(ge=1, le=65535)]], Field(min_length=1, max_length=32)] = (
        Field(default_factory=lambda: list(DEFAULT_FIELDS))
    )
    count: Annotated[int, Field(ge=1, le=60)] = 5


@functools.cache
def series_of_fields() -> dict[int, tuple[str, str | None]]:
    """Field id -> (exported series, its `link` label or None), from the shipped counters file."""
    return {f.field_id: (f.spec.name, f.link) for f in load_counters() if f.fallback_for is None}


def _value(answer: dict[str, Any], field_id: int) -> float | None:
    """The field's value in one answer (summed over links where the series is per link)."""
    found = series_of_fields().get(field_id)
    if found is None:
        return None
    values = [s["value"] for s in answer.get("series", []) if s.get("name") == found[0]]
    return sum(values) if values else None


@action("dcgm_sample", "read", DcgmSampleParams)
def dcgm_sample(params: DcgmSampleParams, ctx: RunContext) -> StepResult:
    """Sample DCGM fields of one GPU from its node's exporter (default: NVLink errors 409/419/429/439,
    PCIe and NVLink traffic 1009-1012)."""
    title = f"DCGM sample of GPU {params.gpu}"
    path = gpu_api(str(params.gpu), "dcgm")
    rows: list[list[Any]] = []
    rendered: list[float] = []
    answer: dict[str, Any] = {}
    for row in range(params.count):
        if row:
            time.sleep(SAMPLE_SECONDS)
        answer = get_json(ctx, path)
        rendered.append(float(answer.get("rendered_at", 0.0)))
        rows.append([_value(answer, f) for f in params.fields])
    unknown = [f for f in params.fields if f not in series_of_fields()]
    absent = [f for i, f in enumerate(params.fields) if all(r[i] is None for r in rows)]
    data: dict[str, Any] = {
        "gpu": params.gpu,
        "uuid": answer.get("uuid"),
        "hostname": answer.get("hostname"),
        "fields": params.fields,
        "names": {str(f): KNOWN[f].name if f in KNOWN else None for f in params.fields},
        "rows": rows,
        "rendered_at": rendered,
        "not_exported": absent,
    }
    if len(absent) == len(params.fields):
        raise ActionError(
            f"GPU {params.gpu}: the exporter exports none of the fields {params.fields} "
            f"(not in its counters file: {unknown or 'none'}); its servescope_dcgm_* series are in /metrics"
        )
    headers = [
        f"{f} {_MEANING.get(f, KNOWN[f].short if f in KNOWN else '') or ''}".strip() for f in params.fields
    ]
    where = f"GPU {params.gpu} ({answer.get('uuid', '')}) on {answer.get('hostname', '?')}"
    lines = [where, table(headers, [[number(v) for v in row] for row in rows]), _NOTE]
    if absent:
        lines.append(f"not exported by this node: {', '.join(map(str, absent))}")
    return StepResult(ok=True, title=title, output="\n".join(lines), data=data)
