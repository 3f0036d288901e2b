"""What `servescope runbook` prints: the list, a runbook's steps with their bound calls, step results."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import typer

from servescope.core.cli_errors import complain
from servescope.runbooks.binding import render
from servescope.runbooks.document import Runbook, RunbookError, Step
from servescope.runbooks.runner import Report, preview


def print_list(found: list[Runbook], errors: list[RunbookError]) -> None:
    """alert, severity and steps of each runbook, in columns; the broken ones on stderr."""
    headers = ("alert", "severity", "steps")
    rows = [(r.alert, r.severity, f"{len(r.read_steps)} read, {len(r.change_steps)} change") for r in found]
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(headers)]
    for alert, severity, steps in [headers, *rows]:
        typer.echo(f"{alert:<{widths[0]}}  {severity:<{widths[1]}}  {steps}")
    for error in errors:
        complain(str(error))


def step_line(step: Step, labels: dict[str, str]) -> tuple[str, bool]:
    """`[kind] id: title` and its bound call; False when a given label is invalid for it."""
    head = f"  [{step.kind}] {step.id}: {step.title}"
    call = preview(step, labels)
    if call.missing:
        need = " ".join(f"--label {m}=..." for m in call.missing)
        return f"{head}\n      {call.written()}   # needs {need}", True
    if call.params is None:
        return f"{head}\n      ! {call.error}", False
    return f"{head}\n      {call.bound(call.params.model_dump(exclude_unset=True))}", True


def _print_steps(steps: list[Step], labels: dict[str, str]) -> bool:
    valid = True
    for step in steps:
        line, ok = step_line(step, labels)
        valid = valid and ok
        typer.echo(line)
    return valid


def print_runbook(runbook: Runbook, labels: dict[str, str]) -> bool:
    """The prose and the steps, section by section; False when a given label is invalid for a step."""
    typer.echo(f"{runbook.alert} ({runbook.severity}): {runbook.summary}")
    typer.echo(f"file: {runbook.path}")
    valid = True
    for section in runbook.section_order():
        typer.echo(f"\n## {section}")
        if runbook.sections[section]:
            typer.echo(runbook.sections[section])
        valid = _print_steps([s for s in runbook.steps if s.section == section], labels) and valid
    outside = [s for s in runbook.steps if s.section not in runbook.sections]
    return _print_steps(outside, labels) and valid


def _safe_name(text: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", text)


def _print_svg(svg: str, step: str | None, svg_dir: Path | None) -> None:
    if svg_dir is None:
        typer.echo(f"   (SVG of {len(svg)} bytes: --svg-dir DIR saves it, --json prints it)")
        return
    svg_dir.mkdir(parents=True, exist_ok=True)
    path = svg_dir / f"{_safe_name(step or 'step')}.svg"
    path.write_text(svg, encoding="utf-8")
    typer.echo(f"   SVG written to {path}")


def print_report(report: Report, labels: dict[str, str], svg_dir: Path | None) -> None:
    """Each result with its output, then the change steps that were not run."""
    for result in report.results:
        status = "OK" if result.ok else "FAILED"
        dry = " (dry run)" if result.dry_run and result.kind == "change" else ""
        typer.echo(f"== [{result.kind}] {result.step}: {result.title} ({result.action}) {status}{dry}")
        typer.echo("\n".join("   " + line if line else "" for line in result.output.splitlines()))
        if result.svg is not None:
            _print_svg(result.svg, result.step, svg_dir)
        typer.echo("")
    if report.not_run:
        typer.echo("Change steps (not run; run one with --step ID, dry unless --execute):")
        for step in report.not_run:
            typer.echo(step_line(step, labels)[0])


def report_json(report: Report, labels: dict[str, str]) -> str:
    payload: dict[str, Any] = {
        "alert": report.runbook.alert,
        "severity": report.runbook.severity,
        "labels": labels,
        "results": [r.model_dump(mode="json") for r in report.results],
        "not_run": [
            {
                "step": s.id,
                "kind": s.kind,
                "title": s.title,
                "action": s.action,
                "params": {k: render(v) for k, v in s.params.items()},
            }
            for s in report.not_run
        ],
    }
    return json.dumps(payload, indent=2, ensure_ascii=False)
