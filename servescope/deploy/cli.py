"""`servescope deploy render`: the Kubernetes manifests, to stdout or as a kustomize base.

Its options are DeployOptions' fields, turned into flags by the one settings bridge, plus the few below
that say where the output goes.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel

from servescope.core.cli_errors import usage_error
from servescope.core.settings_cli import settings_command
from servescope.deploy.canary import CanaryOptions
from servescope.deploy.options import DeployOptions
from servescope.deploy.runbooks import RunbookTokens

app = typer.Typer(
    help="Kubernetes manifests: the exporter DaemonSet, the runbook service, rules, dashboards, policies.",
    no_args_is_help=True,
    add_completion=False,
)


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
            usage_error(
                f"{', '.join(outdated)}; run `servescope deploy render --out {out}` with the "
                "options it was rendered with",
                1,
                kind="stale",
            )
        typer.echo(f"{out} and {receiver} are current")
        return
    written = write_base(out, receiver, options)
    outside = [path for path in written if path.parent != out]
    typer.echo(f"wrote {len(written) - len(outside)} files to {out}, and {', '.join(map(str, outside))}")


def _output(name: str, annotation: Any, default: Any, flag: str, help_text: str) -> inspect.Parameter:
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[annotation, typer.Option(flag, help=help_text, rich_help_panel="Output")],
    )


OUTPUT = (
    _output(
        "webhook_token_file",
        Path | None,
        None,
        "--webhook-token-file",
        "File holding the token Alertmanager sends: adds the Secret to the output (stdout only).",
    ),
    _output(
        "change_token_file",
        Path | None,
        None,
        "--change-token-file",
        "File holding the token people send to run change steps (with --webhook-token-file).",
    ),
    _output(
        "out",
        Path | None,
        None,
        "--out",
        "Write a kustomize base here (one file per object, kustomization.yaml).",
    ),
    _output(
        "receiver_out",
        Path | None,
        None,
        "--receiver-out",
        "Where --out writes the Alertmanager snippet (default: alertmanager-receiver.yaml beside the base's "
        "folder; it is not a Kubernetes object).",
    ),
    _output(
        "check",
        bool,
        False,
        "--check",
        "With --out: write nothing, exit 1 when the base or snippet is stale.",
    ),
    _output(
        "alertmanager_receiver",
        bool,
        False,
        "--alertmanager-receiver",
        "Print the Alertmanager snippet instead of the manifests.",
    ),
    _output(
        "receiver_rules",
        bool,
        False,
        "--receiver-rules",
        "Print the rules for the receiver's ruler (--rules-for mimir or thanos) instead of the manifests.",
    ),
)


def _render(models: dict[type[BaseModel], BaseModel], output: dict[str, Any]) -> None:
    options, canary = models[DeployOptions], models[CanaryOptions]
    assert isinstance(options, DeployOptions) and isinstance(canary, CanaryOptions)
    if canary.canary:
        _canary(options, canary, output)
        return
    out: Path | None = output["out"]
    check: bool = output["check"]
    if (check or output["receiver_out"] is not None) and out is None:
        usage_error(f"{'--check' if check else '--receiver-out'} needs --out DIR")
    tokens = _tokens(output["webhook_token_file"], output["change_token_file"], writes_files=out is not None)
    warning = options.state_warning()
    if warning is not None:
        typer.echo(warning, err=True)
    if out is not None:
        from servescope.deploy.render import RECEIVER

        _write_or_check(options, out, output["receiver_out"] or out.parent / RECEIVER, check)
        return
    from servescope.deploy.render import (  # the bundles are loaded only when something is rendered
        receiver_rules_text,
        receiver_text,
        stream,
    )

    if output["receiver_rules"]:
        if not options.rule_file_for_ruler:
            usage_error("--receiver-rules prints the rules file of --rules-for mimir or thanos")
        typer.echo(receiver_rules_text(options), nl=False)
        return
    typer.echo(
        receiver_text(options) if output["alertmanager_receiver"] else stream(options, tokens), nl=False
    )


def _canary(options: DeployOptions, canary: CanaryOptions, output: dict[str, Any]) -> None:
    chosen = [
        flag
        for flag, name in (("--out", "out"), ("--alertmanager-receiver", "alertmanager_receiver"))
        if output[name]
    ]
    if chosen:
        usage_error(f"--canary prints the controller's analysis to stdout: drop {chosen[0]}")
    from servescope.deploy.canary import render

    typer.echo(render(options, canary), nl=False)


app.command("render")(
    settings_command(
        [DeployOptions, CanaryOptions],
        _render,
        doc="""Render every manifest for these options: to stdout (`| kubectl apply -f -`), or with --out as
        a kustomize base (`kubectl apply -k DIR`) plus the Alertmanager snippet beside it.""",
        extra=OUTPUT,
    )
)
