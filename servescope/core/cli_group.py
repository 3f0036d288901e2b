"""A subcommand group of the `servescope` CLI."""

from __future__ import annotations

import typer


def _group() -> None:
    # Without a callback, typer runs a group of one command as that command: `tune run` would become `tune`.
    pass


def command_group(help_text: str) -> typer.Typer:
    """A group whose commands stay subcommands however many it has; `help_text` is its --help."""
    group = typer.Typer(help=help_text, no_args_is_help=True)
    group.callback()(_group)
    return group
