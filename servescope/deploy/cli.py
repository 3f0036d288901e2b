"""`servescope deploy render`: the Kubernetes manifests, to stdout or as a kustomize base."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError

from servescope.deploy.options import DeployOptions, flag_of
from servescope.deploy.runbooks import RunbookTokens

app = typer.Typer(
    help="Kubernetes manifests: the exporter DaemonSet, the runbook service, rules, dashboards, policies.",
    no_args_is_help=True,
    add_completion=False,
)


def option(field: str, shown: str | None = None) -> Any:
    """A typer option whose flag and help come from the DeployOptions field."""
    info = DeployOptions.model_fields[field]
    extra = info.json_schema_extra
    flag = str(extra["cli"]) if isinstance(extra, dict) else f"--{field.replace('_', '-')}"
    return typer.Option(flag, help=info.description, show_default=shown if shown is not None else True)


def default(field: str) -> Any:
    return DeployOptions.model_fields[field].get_default(call_default_factory=True)


def _pairs_shown(field: str) -> str:
    return ", ".join(f"{key}={value}" for key, value in default(field).items())


def usage_error(message: str) -> NoReturn:
    typer.echo(f"servescope: error: {message}", err=True)
    raise typer.Exit(2)


def _options(values: dict[str, Any]) -> DeployOptions:
    given = {field: value for field, value in values.items() if value is not None}
    try:
        return DeployOptions(**given)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else "?"
        message = str(error["msg"]).removeprefix("Value error, ")
        usage_error(f"invalid value for {flag_of(field)}: {message}")


def _read_token(path: Path, flag: str) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        usage_error(f"invalid value for {flag}: {path}: cannot read: {exc}")
    if not token:
        usage_error(f"invalid value for {flag}: {path} is empty")
    if any(char.isspace() for char in token):
        usage_error(f"invalid value for {flag}: {path} holds more than one word")
    return token


def _tokens(webhook: Path | None, change: Path | None, writes_files: bool) -> RunbookTokens | None:
    if webhook is None and change is None:
        return None
    if writes_files:
        usage_error(
            "--webhook-token-file and --change-token-file are never written into a base on disk; pipe "
            "`servescope deploy render` to `kubectl apply -f -`, or create the Secret (deploy/README.md)"
        )
    if webhook is None or change is None:
        usage_error(
            f"{'--webhook-token-file' if webhook is None else '--change-token-file'} is missing: "
            "give both token files, or neither"
        )
    return RunbookTokens(
        _read_token(webhook, "--webhook-token-file"), _read_token(change, "--change-token-file")
    )


def _write_or_check(options: DeployOptions, out: Path, receiver: Path, check: bool) -> None:
    from servescope.deploy.render import stale, write_base

    if check:
        outdated = stale(out, receiver, options)
        if outdated:
            typer.echo(
                f"stale: {', '.join(outdated)}; run `servescope deploy render --out {out}` with the "
                "options it was rendered with",
                err=True,
            )
            raise typer.Exit(1)
        typer.echo(f"{out} and {receiver} are current")
        return
    written = write_base(out, receiver, options)
    typer.echo(f"wrote {len(written) - 1} files to {out}, and {receiver}")


@app.command()
def render(  # noqa: PLR0917 (typer: one parameter per option)
    namespace: Annotated[str, option("namespace")] = default("namespace"),
    create_namespace: Annotated[bool, option("create_namespace")] = default("create_namespace"),
    image: Annotated[str, option("image")] = default("image"),
    image_pull_policy: Annotated[str, option("image_pull_policy")] = default("image_pull_policy"),
    process_attribution: Annotated[bool, option("process_attribution")] = default("process_attribution"),
    host_network: Annotated[bool, option("host_network")] = default("host_network"),
    node_selector: Annotated[list[str] | None, option("node_selector", _pairs_shown("node_selector"))] = None,
    runtime_class: Annotated[str, option("runtime_class", "none")] = default("runtime_class"),
    dcgm_exporter_url: Annotated[str, option("dcgm_exporter_url", "none")] = default("dcgm_exporter_url"),
    scrape_interval: Annotated[str, option("scrape_interval")] = default("scrape_interval"),
    release: Annotated[str, option("release")] = default("release"),
    prometheus_namespace: Annotated[str, option("prometheus_namespace")] = default("prometheus_namespace"),
    prometheus_pod_label: Annotated[
        list[str] | None, option("prometheus_pod_labels", _pairs_shown("prometheus_pod_labels"))
    ] = None,
    alertmanager_namespace: Annotated[str, option("alertmanager_namespace")] = default(
        "alertmanager_namespace"
    ),
    alertmanager_pod_label: Annotated[
        list[str] | None, option("alertmanager_pod_labels", _pairs_shown("alertmanager_pod_labels"))
    ] = None,
    people_namespace: Annotated[str, option("people_namespace", "none")] = default("people_namespace"),
    prometheus_url: Annotated[str, option("prometheus_url", "derived")] = default("prometheus_url"),
    alertmanager_url: Annotated[str, option("alertmanager_url", "derived")] = default("alertmanager_url"),
    runbook_url: Annotated[str, option("runbook_url", "derived")] = default("runbook_url"),
    grafana_url: Annotated[str, option("grafana_url")] = default("grafana_url"),
    incidents_pvc: Annotated[str, option("incidents_pvc", "none")] = default("incidents_pvc"),
    webhook_token_file: Annotated[
        Path | None,
        typer.Option(
            "--webhook-token-file",
            help="File holding the token Alertmanager sends: adds the Secret to the output (stdout only).",
        ),
    ] = None,
    change_token_file: Annotated[
        Path | None,
        typer.Option(
            "--change-token-file",
            help="File holding the token people send to run change steps (with --webhook-token-file).",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write a kustomize base here (one file per object, kustomization.yaml)."),
    ] = None,
    receiver_out: Annotated[
        Path | None,
        typer.Option(
            "--receiver-out",
            help="Where --out writes the Alertmanager snippet (default: alertmanager-receiver.yaml beside "
            "the base's folder; it is not a Kubernetes object).",
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option("--check", help="With --out: write nothing, exit 1 when the base or snippet is stale."),
    ] = False,
    alertmanager_receiver: Annotated[
        bool,
        typer.Option(
            "--alertmanager-receiver", help="Print the Alertmanager snippet instead of the manifests."
        ),
    ] = False,
) -> None:
    """Render every manifest for these options: to stdout (`| kubectl apply -f -`), or with --out as a
    kustomize base (`kubectl apply -k DIR`) plus the Alertmanager snippet beside it."""
    options = _options(
        {
            "namespace": namespace,
            "create_namespace": create_namespace,
            "image": image,
            "image_pull_policy": image_pull_policy,
            "process_attribution": process_attribution,
            "host_network": host_network,
            "node_selector": node_selector,
            "runtime_class": runtime_class,
            "dcgm_exporter_url": dcgm_exporter_url,
            "scrape_interval": scrape_interval,
            "release": release,
            "prometheus_namespace": prometheus_namespace,
            "prometheus_pod_labels": prometheus_pod_label,
            "alertmanager_namespace": alertmanager_namespace,
            "alertmanager_pod_labels": alertmanager_pod_label,
            "people_namespace": people_namespace,
            "prometheus_url": prometheus_url,
            "alertmanager_url": alertmanager_url,
            "runbook_url": runbook_url,
            "grafana_url": grafana_url,
            "incidents_pvc": incidents_pvc,
        }
    )
    if (check or receiver_out is not None) and out is None:
        usage_error(f"{'--check' if check else '--receiver-out'} needs --out DIR")
    tokens = _tokens(webhook_token_file, change_token_file, writes_files=out is not None)
    if out is not None:
        from servescope.deploy.render import RECEIVER

        _write_or_check(options, out, receiver_out or out.parent / RECEIVER, check)
        return
    from servescope.deploy.render import (  # the bundles are loaded only when something is rendered
        receiver_text,
        stream,
    )

    typer.echo(receiver_text(options) if alertmanager_receiver else stream(options, tokens), nl=False)
