"""`servescope dcgm ...`: read captured dmon or dcgm-exporter output; show the counters file."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from servescope.core.dcgm.counters import CountersError, default_counters_text, load_counters
from servescope.core.dcgm.dmon_format import CellStatus, ErrorLine, Header, Row, Unparseable, parse_dmon
from servescope.core.dcgm.field_table import BY_SHORT
from servescope.exporter.dcgm.exporter_source import read_exporter

app = typer.Typer(
    help="DCGM helpers: parse captured `dcgmi dmon` or dcgm-exporter output, show fields.",
    no_args_is_help=True,
)


class InputFormat(StrEnum):
    DMON = "dmon"
    EXPORTER = "exporter"


def _read(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    try:
        return Path(source).read_text(errors="replace")
    except OSError as exc:
        typer.echo(f"servescope: error: cannot read {source}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None


def _not_this_format(source: str, what: str) -> typer.Exit:
    typer.echo(f"servescope: error: {source}: {what}", err=True)
    return typer.Exit(2)


MAX_WARNINGS = 20


def _print_dmon(text: str, source: str) -> None:
    events = list(parse_dmon(text.splitlines()))
    if not any(isinstance(event, Header) for event in events):
        raise _not_this_format(source, "not dcgmi dmon output: no '#Entity' header line found")
    skipped = [event for event in events if isinstance(event, Unparseable)]
    for event in events:
        if isinstance(event, Row):
            for short, cell in zip(event.header.columns, event.cells, strict=True):
                known = BY_SHORT.get(short)
                record: dict[str, object] = {"entity": event.entity, "entity_id": event.entity_id}
                if event.link is not None:
                    record["link"] = event.link
                record |= {"field_id": known.field_id if known else None, "field": short, "value": cell.value}
                if cell.status is not CellStatus.OK:
                    record["status"] = cell.status.value
                typer.echo(json.dumps(record))
        elif isinstance(event, ErrorLine):
            typer.echo(
                f"{source} line {event.line_no}: dcgmi reported {event.kind.value}: {event.text}", err=True
            )
    for event in skipped[:MAX_WARNINGS]:
        typer.echo(f"{source} line {event.line_no}: skipped, {event.reason}", err=True)
    if len(skipped) > MAX_WARNINGS:
        typer.echo(f"{source}: {len(skipped) - MAX_WARNINGS} more lines skipped", err=True)


def _print_exporter(text: str, source: str) -> None:
    try:
        values, _ = read_exporter(text)
    except ValueError as exc:
        raise _not_this_format(source, f"not a Prometheus exposition: {exc}") from None
    if not values:
        raise _not_this_format(source, "no DCGM_FI_* series found")
    for v in values:
        record = {
            "entity": "GPU",
            "entity_id": v.gpu,
            "uuid": v.uuid,
            "field_id": v.field_id,
            "field": v.name,
            "value": v.value,
        }
        if v.mig_instance is not None:
            record["gpu_instance"] = v.mig_instance
        typer.echo(json.dumps(record))


@app.command()
def parse(
    source: Annotated[str, typer.Argument(help="File to read, or - for standard input.")] = "-",
    fmt: Annotated[
        InputFormat,
        typer.Option("--format", help="dmon: `dcgmi dmon` output; exporter: a dcgm-exporter /metrics page."),
    ] = InputFormat.DMON,
) -> None:
    """Print one JSON object per value (`value` is null for N/A); exit 2 when the input is not that format."""
    text = _read(source)
    if fmt is InputFormat.DMON:
        _print_dmon(text, source)
    else:
        _print_exporter(text, source)


@app.command()
def fields(
    counters: Annotated[
        str,
        typer.Option(
            "--counters",
            envvar="SERVESCOPE_DCGM_COUNTERS",
            help="Counters file to check and print; default: the built-in one.",
        ),
    ] = "",
) -> None:
    """Print the active counters file (after checking every line)."""
    try:
        load_counters(counters or None)
    except CountersError as exc:
        typer.echo(f"servescope: error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(Path(counters).read_text() if counters else default_counters_text(), nl=False)
