"""`dcgm_sample`: a few rows of `dcgmi dmon` for one GPU (NVLink errors, PCIe and NVLink traffic)."""

from __future__ import annotations

import subprocess
from typing import Annotated, Any

from pydantic import Field

from servescope.exporter.dcgm.dmon_format import ErrorLine, Header, Row, Unparseable, parse_dmon
from servescope.exporter.dcgm.field_table import KNOWN
from servescope.runbooks.actions.base import (
    ActionError,
    RunContext,
    StepResult,
    action,
    run_argv,
    shown,
    tail,
)
from servescope.runbooks.actions.params import GpuIndex, Params
from servescope.runbooks.actions.text import number, table

DEFAULT_FIELDS = [409, 419, 429, 439, 1009, 1010, 1011, 1012]
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


def _dmon(argv: list[str], dcgmi: str, timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return run_argv(argv, timeout=timeout)
    except FileNotFoundError:
        raise ActionError(
            f"{dcgmi!r} not found: install DCGM (datacenter-gpu-manager) on the node, "
            "or pass --dcgmi PATH; "
            "the exporter's servescope_dcgm_* series carry the same counters when its DCGM source runs"
        ) from None


def _parse(stdout: str, gpu: int) -> tuple[list[str], list[list[Any]], list[str]]:
    """The columns, the GPU's rows and the problems of a `dcgmi dmon` output."""
    rows: list[list[Any]] = []
    columns: list[str] = []
    problems: list[str] = []
    for event in parse_dmon(stdout.splitlines()):
        if isinstance(event, Header):
            columns = list(event.columns)
        elif isinstance(event, Row):
            if event.entity == "GPU" and event.entity_id == str(gpu) and event.link is None:
                rows.append(list(event.values))
        elif isinstance(event, ErrorLine):
            problems.append(f"{event.kind}: {event.text}")
        elif isinstance(event, Unparseable):
            problems.append(f"line {event.line_no}: {event.reason}: {event.text[:120]}")
    return columns, rows, problems


def _output(argv: list[str], fields: list[int], rows: list[list[Any]], problems: list[str]) -> str:
    headers = [f"{f} {_MEANING.get(f, KNOWN[f].short if f in KNOWN else '')}".strip() for f in fields]
    body = table(headers, [[number(v) for v in row] for row in rows]) if rows else "no row for this GPU"
    return "\n".join([f"$ {shown(argv)}", body, _NOTE, *problems])


@action("dcgm_sample", "read", DcgmSampleParams)
def dcgm_sample(params: DcgmSampleParams, ctx: RunContext) -> StepResult:
    """Sample DCGM fields of one GPU with `dcgmi dmon` (default: NVLink errors 409/419/429/439, PCIe and
    NVLink traffic 1009-1012)."""
    fields = ",".join(str(f) for f in params.fields)
    argv = [ctx.dcgmi, "dmon", "-i", str(params.gpu), "-e", fields, "-c", str(params.count)]
    title = f"DCGM sample of GPU {params.gpu}"
    done = _dmon(argv, ctx.dcgmi, ctx.timeout_seconds + params.count * 1.5)
    columns, rows, problems = _parse(done.stdout, params.gpu)
    data: dict[str, Any] = {
        "gpu": params.gpu,
        "fields": params.fields,
        "names": {str(f): KNOWN[f].name if f in KNOWN else None for f in params.fields},
        "columns": columns,
        "rows": rows,
        "returncode": done.returncode,
        "problems": problems,
    }
    if done.returncode != 0 or (not rows and problems):
        stderr = "\n" + tail(done.stderr, 2000) if done.stderr.strip() else ""
        output = f"{shown(argv)} exited {done.returncode}\n" + "\n".join(problems) + stderr
        return StepResult(ok=False, title=title, output=output, data=data, command=argv)
    output = _output(argv, params.fields, rows, problems)
    return StepResult(ok=True, title=title, output=output, data=data, command=argv)
