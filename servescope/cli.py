"""The `servescope` command line."""

from __future__ import annotations

import importlib
import platform
import sys
from typing import Annotated

import typer

from servescope import __version__
from servescope.core.cli_errors import usage_error

app = typer.Typer(
    name="servescope",
    help="Observability and alerting for LLM serving (vLLM) on NVIDIA GPUs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


# Subcommands are imported only when they run: `serve`, the long-running one, then does not carry the
# alert, dashboard, deploy and demo code (about 5 MiB of resident memory per exporter).
# name -> (module, attribute): a Typer is added as a group of commands, a function as one command.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("servescope.exporter.serve", "serve"),
    "dcgm": ("servescope.exporter.dcgm.cli", "app"),
    "vllm": ("servescope.exporter.vllm.cli", "app"),
    "advise": ("servescope.kit.advisor.cli", "app"),
    "alerts": ("servescope.bundle.alerts.cli", "app"),
    "dashboards": ("servescope.bundle.dashboards.cli", "app"),
    "bundle": ("servescope.deploy.bundle_cli", "app"),
    "runbook": ("servescope.runbooks.cli", "app"),
    "runbook-server": ("servescope.runbooks.server_cli", "server_command"),
    "demo": ("servescope.demo.cli", "demo"),
    "deploy": ("servescope.deploy.cli", "app"),
    "sim": ("servescope.sim.cli", "app"),
    "capacity": ("servescope.kit.capacity.cli", "app"),
    "tune": ("servescope.kit.tune.cli", "app"),
    "load": ("servescope.kit.load.cli", "app"),
    "canary": ("servescope.kit.canary.cli", "app"),
}
_registered: set[str] = set()


def register_subcommands(only: str | None = None) -> None:
    """Add the subcommand `only` to the app, or every subcommand (for --help and for tests)."""
    for name, (module, attribute) in SUBCOMMANDS.items():
        if (only is None or name == only) and name not in _registered:
            found = getattr(importlib.import_module(module), attribute)
            if isinstance(found, typer.Typer):
                app.add_typer(found, name=name)
            else:
                app.command(name)(found)
            _registered.add(name)


@app.command()
def version() -> None:
    """Print the servescope version."""
    typer.echo(f"servescope {__version__} (Python {platform.python_version()})")


@app.command(hidden=True)
def docs(
    document: Annotated[
        list[str] | None,
        typer.Option(
            "--document",
            help="A Markdown file to update (repeat it); default: README.md, DEVELOPING.md, docs/*.md.",
        ),
    ] = None,
    check: Annotated[bool, typer.Option(help="Only check that the generated tables are current.")] = False,
) -> None:
    """Regenerate the documents' tables: settings, metrics, alerts, dashboards."""
    from pathlib import Path

    from servescope.docs import documents, update_document

    paths = [Path(name) for name in document] if document else documents(Path.cwd())
    for path in paths:
        if not path.is_file():
            usage_error(f"{path}: no such file", 1)
        if not update_document(path, check=check):
            usage_error(f"{path}: generated tables are stale; run `make docs`", 1)


def main() -> None:
    command = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
    if command not in ("version", "docs"):
        # A subcommand gets only itself; anything else (--help, a typo) gets the full list to show.
        register_subcommands(command if command in SUBCOMMANDS else None)
    app()
