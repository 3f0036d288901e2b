"""How the runbook CLI tests drive `servescope runbook`: in process, with wide output."""

from __future__ import annotations

from typing import Any

from typer.testing import CliRunner

from servescope.cli import app, register_subcommands

register_subcommands()  # the CLI imports subcommands when they run; these tests drive them directly


def invoke(*args: str) -> Any:
    """`servescope runbook ARGS`, as typer's runner returns it."""
    return CliRunner().invoke(app, ["runbook", *args], env={"COLUMNS": "200"})


def label_args(labels: dict[str, str]) -> list[str]:
    """One `--label KEY=VALUE` pair per label."""
    return [arg for k, v in labels.items() for arg in ("--label", f"{k}={v}")]
