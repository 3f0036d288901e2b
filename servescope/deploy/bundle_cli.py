"""`servescope bundle build`: the whole alerting bundle from one config file, in one folder.

    <out>/alerts/       rules.yaml, prometheusrule.yaml, alertmanager.yaml (as `alerts build`)
    <out>/dashboards/   the Grafana JSON, provisioning and ConfigMaps (as `dashboards build`)
    <out>/runbooks/     one <Alert>.md per alert, its `{{ config.x }}` thresholds filled in

Every threshold a rule fires on is the one its dashboard panel draws and its runbook page names: all three
are rendered here from the same config. The pages keep their `{{ labels.x }}` placeholders (an alert's
labels, bound when a step runs); `runbook-server --runbooks <out>/runbooks` serves them as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from servescope.bundle.alerts import bundle as alerts
from servescope.bundle.alerts.cli import exit_on_lint
from servescope.bundle.dashboards import build as dashboards
from servescope.core.cli_errors import exit_if_stale, usage_error
from servescope.core.config import AlertsConfig
from servescope.core.config_option import ConfigOption, config_or_exit
from servescope.core.rendered import changed_files, write_files
from servescope.runbooks.document import parse_runbook, read_page, runbook_paths
from servescope.runbooks.model import RunbookError
from servescope.runbooks.settings import SHIPPED_RUNBOOKS

app = typer.Typer(
    help="The alerting bundle (rules, Alertmanager, dashboards, runbook pages) from one config.",
    no_args_is_help=True,
    add_completion=False,
)
PARTS = ("alerts", "dashboards", "runbooks")


def runbook_pages(cfg: AlertsConfig, folder: Path = SHIPPED_RUNBOOKS) -> dict[str, str]:
    """Each runbook page with the thresholds of `cfg` filled in, checked as the service would load it."""
    pages: dict[str, str] = {}
    for path in runbook_paths(folder):
        text = read_page(path, cfg)
        parse_runbook(path, text, config=cfg)
        pages[path.name] = text
    return pages


def render_all(cfg: AlertsConfig) -> dict[str, str]:
    """Every file of the bundle, by its path under the output folder."""
    files = {f"alerts/{name}": text for name, text in alerts.render_all(cfg).items()}
    files |= {f"dashboards/{name}": text for name, text in dashboards.render_all(cfg).items()}
    files |= {f"runbooks/{name}": text for name, text in runbook_pages(cfg).items()}
    return files


def stale(out: Path, cfg: AlertsConfig) -> list[str]:
    """Files of `out` that differ from a fresh build, missing ones included, and files no build writes."""
    fresh = render_all(cfg)
    outdated = changed_files(out, fresh)
    extra = [
        f"{part}/{path.name}"
        for part in PARTS
        if (out / part).is_dir()
        for path in (out / part).iterdir()
        if f"{part}/{path.name}" not in fresh
    ]
    return sorted(outdated + extra)


@app.command()
def build(
    out: Annotated[
        Path, typer.Option("--out", help="Folder to write alerts/, dashboards/ and runbooks/ to.")
    ],
    config: ConfigOption = None,
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 when the files in --out are stale.")
    ] = False,
) -> None:
    """Render rules, Alertmanager config, dashboards and runbook pages from one config into --out."""
    cfg = config_or_exit(config)
    exit_on_lint(cfg)
    try:
        files = render_all(cfg)
    except RunbookError as exc:
        usage_error(str(exc), 1)
    if check:
        exit_if_stale(out, stale(out, cfg), "bundle build")
        typer.echo(f"{out}: {len(files)} files are current")
        return
    write_files(out, files)
    typer.echo(f"wrote {len(files)} files to {out}: " + ", ".join(f"{part}/" for part in PARTS))
