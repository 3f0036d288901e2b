"""`servescope runbook audit verify`: is the audit trail whole? And the record a CLI `--execute` makes.

verify reads a trail (the service's file, or the log collector's copy of its stdout: lines that are not
records are skipped) and checks its hash chain: a removed, reordered or edited line breaks it where it
happened. A trail cut short at its end still chains; `--head` with the last hash the log collector kept
(or printed by an earlier verify) finds that too.
"""

from __future__ import annotations

import getpass
import socket
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from servescope.core.cli_errors import usage_error
from servescope.runbooks.audit import AuditError, AuditLog, Outcome, verify
from servescope.runbooks.runner import Report

app = typer.Typer(help="The audit trail of change steps.", no_args_is_help=True, add_completion=False)


@app.command("verify")
def verify_command(
    trail: Annotated[
        Path, typer.Argument(help="The audit trail (JSON Lines), e.g. /var/lib/servescope/audit.jsonl.")
    ],
    head: Annotated[
        str | None,
        typer.Option("--head", help="The hash the trail must end at (from the log collector's copy)."),
    ] = None,
) -> None:
    """Check the trail's hash chain: exit 0 when whole, 1 naming the first lines that break it."""
    try:
        lines = trail.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        usage_error(f"{trail}: cannot read: {exc}", 1)
    problems, count, last = verify(lines, head)
    for problem in problems:
        typer.echo(f"{trail}: {problem}", err=True)
    if problems:
        raise typer.Exit(1)
    typer.echo(f"{trail}: {count} record(s), chain whole; head {last}")


def cli_identity() -> str:
    """Who acts from a shell: the user and the host (a pod's name, under kubectl exec)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "uid-unknown"
    return f"cli:{user}@{socket.gethostname()}"


def record_cli(
    trail: Path, alert: str, step: str, labels: dict[str, str], *, outcome: Outcome, message: str
) -> None:
    """One record of a CLI --execute, in the same trail and format as the service's. AuditError when it
    cannot be written."""
    record: dict[str, Any] = {"host": "cli", "identity": cli_identity(), "token": None, "parameters": None}
    AuditLog(trail, echo=sys.stderr).record(
        **record, alert=alert, step=step, labels=labels, execute=True, outcome=outcome, message=message
    )


def audited_execute(trail: Path, alert: str, step: str, labels: dict[str, str], act: Any) -> Report:
    """Record the request, act (`act()` returns the report), record the outcome; refuse to act when the
    first record cannot be written."""
    try:
        record_cli(trail, alert, step, labels, outcome="accepted", message="about to run (--execute)")
    except AuditError as exc:
        usage_error(f"not executed: {exc} (every --execute is recorded; pass --audit-log FILE)", 1)
    report: Report = act()
    ok = all(r.ok for r in report.results)
    output = "\n".join(r.output for r in report.results)
    try:
        record_cli(trail, alert, step, labels, outcome="executed" if ok else "failed", message=output)
    except AuditError as exc:
        typer.echo(f"warning: the outcome is not recorded: {exc}", err=True)
    return report
