"""The `servescope` command line."""

from __future__ import annotations

import platform
import sys
from typing import Annotated

import typer

from servescope import __version__
from servescope.common.settings_cli import usage_error

app = typer.Typer(
    name="servescope",
    help="Observability and alerting for LLM serving (vLLM) on NVIDIA GPUs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _alerts() -> None:
    from servescope.alerts.cli import app as alerts_app

    app.add_typer(alerts_app, name="alerts")


def _dashboards() -> None:
    from servescope.dashboards.cli import app as dashboards_app

    app.add_typer(dashboards_app, name="dashboards")


def _dcgm() -> None:
    from servescope.exporter.dcgm.cli import app as dcgm_app

    app.add_typer(dcgm_app, name="dcgm")


def _vllm() -> None:
    from servescope.exporter.vllm.cli import app as vllm_app

    app.add_typer(vllm_app, name="vllm")


def _advise() -> None:
    from servescope.advisor.cli import app as advise_app

    app.add_typer(advise_app, name="advise")


def _runbook() -> None:
    from servescope.runbooks.cli import app as runbook_app

    app.add_typer(runbook_app, name="runbook")


def _runbook_server() -> None:
    from servescope.runbooks.server_cli import server_command

    app.command("runbook-server")(server_command)


def _demo() -> None:
    from servescope.demo.cli import demo

    app.command("demo")(demo)


def _serve() -> None:
    from servescope.serve import serve

    app.command("serve")(serve)


def _sim() -> None:
    from servescope.sim.cli import app as sim_app

    app.add_typer(sim_app, name="sim")


def _load() -> None:
    from servescope.load.cli import app as load_app

    app.add_typer(load_app, name="load")


def _deploy() -> None:
    from servescope.deploy.cli import app as deploy_app

    app.add_typer(deploy_app, name="deploy")


# Subcommands are imported only when they run: `serve`, the long-running one, then does not carry the
# alert, dashboard, deploy and demo code (about 5 MiB of resident memory per exporter).
SUBCOMMANDS = {
    "serve": _serve,
    "dcgm": _dcgm,
    "vllm": _vllm,
    "advise": _advise,
    "alerts": _alerts,
    "dashboards": _dashboards,
    "runbook": _runbook,
    "runbook-server": _runbook_server,
    "demo": _demo,
    "deploy": _deploy,
    "sim": _sim,
    "load": _load,
}
_registered: set[str] = set()


def register_subcommands(only: str | None = None) -> None:
    """Add the subcommand `only` to the app, or every subcommand (for --help and for tests)."""
    for name, register in SUBCOMMANDS.items():
        if (only is None or name == only) and name not in _registered:
            register()
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
