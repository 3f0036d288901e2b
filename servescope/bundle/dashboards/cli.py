"""`servescope dashboards`: build the dashboards (JSON, provisioning, ConfigMaps) and push them to Grafana."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from servescope.bundle.dashboards import BUILD_DIR
from servescope.bundle.dashboards.build import stale, write
from servescope.core.cli_errors import usage_error
from servescope.core.config_option import ConfigOption, config_or_exit
from servescope.core.rendered import write_or_check

DEFAULT_OUT = BUILD_DIR
app = typer.Typer(help="Grafana dashboards as code.", no_args_is_help=True, add_completion=False)


@app.command()
def build(
    out: Annotated[
        Path, typer.Option("--out", help="Folder for the JSON, provisioning.yaml and ConfigMaps.")
    ] = DEFAULT_OUT,
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 when --out is stale.")
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Generate every dashboard into --out, thresholds and runbook link from the defaults (or --config)."""
    cfg = config_or_exit(config)
    write_or_check(out, cfg, stale, write, check=check, command="dashboards build", current="current")


@app.command()
def push(
    grafana_url: Annotated[
        str, typer.Option("--grafana-url", help="Grafana's base URL, e.g. https://grafana.example.com.")
    ],
    folder: Annotated[
        str, typer.Option("--folder", help="Grafana folder title; its uid is derived from it.")
    ] = "servescope",
    directory: Annotated[Path, typer.Option("--dir", help="Folder of the built *.json.")] = DEFAULT_OUT,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace dashboards Grafana already holds (changed there).")
    ] = False,
) -> None:
    """Push every built dashboard to Grafana's HTTP API.

    The token is read from SERVESCOPE_GRAFANA_TOKEN or GRAFANA_TOKEN (a service account token with the Editor
    role on the folder), never from the command line, and never printed.
    """
    from servescope.bundle.dashboards.push import PushError, token_from_env  # only this command needs httpx
    from servescope.bundle.dashboards.push import push as push_dashboards

    def echo(text: str, is_error: bool) -> None:
        typer.echo(text, err=is_error)

    try:
        token = token_from_env()
        report = push_dashboards(grafana_url, token, folder, directory, overwrite=overwrite, echo=echo)
    except PushError as exc:
        usage_error(str(exc), 1)
    total = len(report.outcomes)
    summary = f"pushed {report.pushed}, failed {report.failed} (of {total}) to folder {folder!r}"
    typer.echo(summary, err=bool(report.failed))
    if report.failed:
        raise typer.Exit(1)
