"""The `servescope` command line."""

from __future__ import annotations

import importlib
import platform
import sys
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Annotated

import typer

from servescope import __version__
from servescope.core.cli_errors import usage_error
from servescope.core.extensions import COMMANDS_GROUP, INSTALL_HINT, SIMULATOR_DISTRIBUTION, missing_simulator

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
    "deploy": ("servescope.deploy.cli", "app"),
    "capacity": ("servescope.kit.capacity.cli", "app"),
    "tune": ("servescope.kit.tune.cli", "app"),
    "load": ("servescope.kit.load.cli", "app"),
    "canary": ("servescope.kit.canary.cli", "app"),
}
# Commands the simulator (the servescope-sim distribution) adds through its entry points (group
# `servescope.commands`: `name`, or `group.name` for a command inside a group). Named here so that, without
# servescope-sim, they are listed and fail with the one line saying how to install it.
SIMULATOR_COMMANDS: dict[str, str] = {
    "demo": "The whole stack on a simulated node (Prometheus, Alertmanager, runbooks, alerts firing).",
    "sim": "The simulated node: its GPU models and scenarios.",
    "load.mock-server": "A mock OpenAI server that queues like an engine, with vLLM's metric names.",
}
_registered: set[str] = set()


def _extension_commands() -> dict[str, EntryPoint | None]:
    """Every command an installed distribution adds, and the simulator's (None: not installed)."""
    found: dict[str, EntryPoint | None] = dict.fromkeys(SIMULATOR_COMMANDS)
    found.update({point.name: point for point in entry_points(group=COMMANDS_GROUP)})
    return found


def _missing_command(full_name: str) -> Callable[[], None]:
    """The stand-in for a simulator command when servescope-sim is not installed: one line, exit 2."""

    def missing() -> None:
        usage_error(str(missing_simulator(f"`servescope {full_name.replace('.', ' ')}`")), 2)

    return missing


def _add(target: typer.Typer, full_name: str, point: EntryPoint | None) -> None:
    """Add the command `point` names to `target` under the last part of `full_name`; without `point`
    (servescope-sim not installed), a stand-in that says how to install it, whatever its arguments."""
    name = full_name.rpartition(".")[2]
    if point is None:
        help_text = f"{SIMULATOR_COMMANDS[full_name]} Needs {SIMULATOR_DISTRIBUTION}: {INSTALL_HINT}."
        any_arguments = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
        target.command(name, help=help_text, context_settings=any_arguments)(_missing_command(full_name))
        return
    found = point.load()
    if isinstance(found, typer.Typer):
        target.add_typer(found, name=name)
    else:
        target.command(name)(found)


def register_subcommands(only: str | None = None) -> None:
    """Add the subcommand `only` to the app, or every subcommand (for --help and for tests)."""
    extensions = _extension_commands()
    for name, (module, attribute) in SUBCOMMANDS.items():
        if (only is None or name == only) and name not in _registered:
            found = getattr(importlib.import_module(module), attribute)
            if isinstance(found, typer.Typer):
                for inner, point in extensions.items():
                    if inner.startswith(f"{name}."):
                        _add(found, inner, point)
                app.add_typer(found, name=name)
            else:
                app.command(name)(found)
            _registered.add(name)
    for name, point in extensions.items():
        if "." not in name and (only is None or name == only) and name not in _registered:
            _add(app, name, point)
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
        known = command in SUBCOMMANDS or command in _extension_commands()
        register_subcommands(command if known else None)
    app()
