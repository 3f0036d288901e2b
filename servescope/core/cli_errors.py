"""How a servescope command reports what went wrong: one line on stderr, `servescope: error: <message>`,
then the command's exit status (2: the command line was wrong; 1: the work failed)."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import typer

PROGRAM = "servescope"


def complain(message: str, *, kind: str = "error") -> None:
    """`servescope: <kind>: <message>` on stderr, for a command that goes on (and fails at its end)."""
    typer.echo(f"{PROGRAM}: {kind}: {message}", err=True)


def usage_error(message: str, code: int = 2, *, kind: str = "error") -> NoReturn:
    """`servescope: <kind>: <message>` on stderr (`error` unless a command names its own kind of
    failure, such as `stale`), then exit with `code`."""
    complain(message, kind=kind)
    raise typer.Exit(code)


def exit_if_stale(out: Path, outdated: list[str], command: str) -> None:
    """`--check` of a build command: name the stale files and how to rebuild them, then exit 1."""
    if outdated:
        typer.echo(f"stale in {out}: {', '.join(outdated)}; run `servescope {command} --out {out}`", err=True)
        raise typer.Exit(1)
