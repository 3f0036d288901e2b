"""`servescope alerts`: build the rule files, the PrometheusRule and the Alertmanager configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from servescope.bundle.alerts import BUILD_DIR
from servescope.bundle.alerts.bundle import FILES, groups, stale, write
from servescope.bundle.alerts.lint import lint, lint_rule_file
from servescope.bundle.alerts.profiles import PROFILES, with_profile
from servescope.core.cli_errors import complain, usage_error
from servescope.core.config import AlertsConfig, load_config
from servescope.core.config_option import ConfigOption, config_or_exit
from servescope.core.rendered import write_or_check

DEFAULT_OUT = BUILD_DIR
app = typer.Typer(help="Alert rules as code.", no_args_is_help=True, add_completion=False)


def exit_on_lint(cfg: AlertsConfig) -> None:
    """Exit 1 naming each problem when the rules built from `cfg` fail the linter."""
    problems = lint(groups(cfg), cfg)
    if problems:
        # A config override can produce a broken rule (e.g. a selector that is not PromQL): never write it.
        for problem in problems:
            complain(str(problem), kind="lint")
        raise typer.Exit(1)


@app.command()
def build(
    out: Annotated[
        Path,
        typer.Option("--out", help="Folder to write rules.yaml, prometheusrule.yaml, alertmanager.yaml to."),
    ] = DEFAULT_OUT,
    config: ConfigOption = None,
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 when the files in --out are stale.")
    ] = False,
    profile: Annotated[
        str,
        typer.Option(
            "--profile",
            help=f"Overrides applied on top of --config: {', '.join(PROFILES)}. `demo` shortens every "
            "`for` and window so simulated faults fire within minutes (what `servescope demo` loads).",
        ),
    ] = "default",
    topology: Annotated[
        str | None,
        typer.Option(
            "--topology",
            help="Who scrapes the engines: exporter, or podmonitor (the rules read the engines' own vllm:* "
            "series and join them to GPUs on namespace, pod). Default: the config's engine_topology.",
        ),
    ] = None,
) -> None:
    """Generate the alert bundle from the defaults (or --config) into --out."""
    # typer declares each option in the signature, which makes this command longer than 40 lines; its body
    # is short.
    overrides = {"engine_topology": topology} if topology else {}
    cfg = config_or_exit(config, lambda loaded: with_profile(loaded, profile, **overrides))
    exit_on_lint(cfg)
    current = f"{', '.join(FILES)} are current"
    write_or_check(out, cfg, stale, write, check=check, command="alerts build", current=current)


@app.command("lint")
def lint_command(
    files: Annotated[list[Path], typer.Argument(help="rules.yaml or prometheusrule.yaml files to check.")],
    config: Annotated[
        Path | None, typer.Option("--config", help="The config the links are checked against (as for build).")
    ] = None,
) -> None:
    """Check rule files offline: annotations, `for`, counters under rate, histogram_quantile over
    `sum by (le)`, metric names known to the exporter. Exit 1 on any problem."""
    try:
        cfg = load_config(config)
        problems = [problem for path in files for problem in lint_rule_file(path, cfg)]
    except (OSError, ValueError) as exc:
        usage_error(str(exc), 1)
    for problem in problems:
        typer.echo(str(problem))
    if problems:
        raise typer.Exit(1)
    typer.echo(f"{', '.join(str(f) for f in files)}: no problems")
