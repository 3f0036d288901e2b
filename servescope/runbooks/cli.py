"""`servescope runbook list|show|run`: the executable runbooks of the alerts.

Exit status: 0 when every step that ran succeeded, 1 when a step failed (or a runbook file is broken),
2 for a usage error: unknown alert or step, a label missing or invalid for a parameter, a bad option.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import TypeAdapter, ValidationError

from servescope.runbooks.actions import HttpUrl, RunContext
from servescope.runbooks.actions.base import DEFAULT_EXPORTER_URL
from servescope.runbooks.audit import DEFAULT_AUDIT_LOG
from servescope.runbooks.binding import render
from servescope.runbooks.document import (
    ENV_RUNBOOKS,
    SECTIONS,
    Runbook,
    RunbookError,
    Step,
    UnknownAlertError,
    is_label_name,
    load_runbook,
    load_runbooks,
    runbooks_dir,
)
from servescope.runbooks.runner import ParamError, Report, UnknownStepError, bind_step, run
from servescope.runbooks.server import ENV_TOKEN

app = typer.Typer(
    help="Executable runbooks: one per alert, read steps run, change steps dry-run unless --execute.",
    no_args_is_help=True,
    add_completion=False,
)

RunbooksOption = Annotated[
    Path | None,
    typer.Option(
        "--runbooks",
        envvar=ENV_RUNBOOKS,
        show_envvar=True,
        help="Folder of <AlertName>.md runbooks (default: runbooks/ of the checkout).",
    ),
]
# Where steps read from and what they run: the same options for `run` and `runbook-server`.
ExporterUrlOption = Annotated[
    str,
    typer.Option(
        "--exporter-url",
        envvar="SERVESCOPE_RUNBOOK_EXPORTER_URL",
        show_envvar=True,
        help="The servescope exporter read actions ask.",
    ),
]
PrometheusUrlOption = Annotated[
    str | None,
    typer.Option(
        "--prometheus-url",
        envvar="SERVESCOPE_RUNBOOK_PROMETHEUS_URL",
        show_envvar=True,
        help="Prometheus for promql steps.",
    ),
]
AlertmanagerUrlOption = Annotated[
    str | None,
    typer.Option(
        "--alertmanager-url",
        envvar="SERVESCOPE_RUNBOOK_ALERTMANAGER_URL",
        show_envvar=True,
        help="Alertmanager for create_silence steps.",
    ),
]
KubectlOption = Annotated[
    str,
    typer.Option("--kubectl", envvar="SERVESCOPE_RUNBOOK_KUBECTL", help="kubectl to run change steps with."),
]
DcgmiOption = Annotated[
    str, typer.Option("--dcgmi", envvar="SERVESCOPE_RUNBOOK_DCGMI", help="dcgmi for dcgm_sample steps.")
]
TimeoutOption = Annotated[float, typer.Option("--timeout", help="Seconds each request or command may take.")]
PerInstanceOption = Annotated[
    bool,
    typer.Option(
        "--exporter-per-instance",
        envvar="SERVESCOPE_RUNBOOK_EXPORTER_PER_INSTANCE",
        show_envvar=True,
        help="Ask the exporter named by the alert's `instance` label (host:port, on the --exporter-url "
        "port) instead of --exporter-url: what a central runbook service in front of a DaemonSet needs.",
    ),
]
LabelOption = Annotated[
    list[str] | None,
    typer.Option(
        "--label", "-l", help="An alert label as name=value (repeat it); templates bind from these."
    ),
]


def _usage(message: str) -> typer.Exit:
    typer.echo(f"servescope: error: {message}", err=True)
    return typer.Exit(2)


def _folder(option: Path | None) -> Path:
    try:
        return runbooks_dir(option)
    except UnknownAlertError as exc:
        raise _usage(str(exc)) from None


def _runbook(folder: Path, alert: str) -> Runbook:
    try:
        return load_runbook(folder, alert)
    except UnknownAlertError as exc:
        raise _usage(str(exc)) from None
    except RunbookError as exc:
        typer.echo(f"servescope: error: {exc}", err=True)
        raise typer.Exit(1) from None


def _labels(pairs: list[str] | None) -> dict[str, str]:
    labels: dict[str, str] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not is_label_name(name):
            raise _usage(
                f"--label {pair[:60]!r}: expected name=value with a label name ([a-zA-Z_][a-zA-Z0-9_]*)"
            )
        if name in labels:
            raise _usage(f"--label {name}: given twice")
        labels[name] = value
    return labels


def _url(option: str, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return str(TypeAdapter(HttpUrl).validate_python(value))
    except ValidationError:
        raise _usage(f"{option} {value[:80]!r}: expected an http:// or https:// URL") from None


def _counts(runbook: Runbook) -> str:
    return f"{len(runbook.read_steps)} read, {len(runbook.change_steps)} change"


def _context(  # noqa: PLR0917 (the options of two commands, one place)
    exporter_url: str,
    prometheus_url: str | None,
    alertmanager_url: str | None,
    kubectl: str,
    dcgmi: str,
    timeout: float,
    *,
    execute: bool = False,
    per_instance: bool = False,
) -> RunContext:
    if not 0 < timeout <= 600:
        raise _usage(f"--timeout {timeout}: expected seconds between 0 and 600")
    return RunContext(
        exporter_url=_url("--exporter-url", exporter_url) or DEFAULT_EXPORTER_URL,
        prometheus_url=_url("--prometheus-url", prometheus_url),
        alertmanager_url=_url("--alertmanager-url", alertmanager_url),
        kubectl=kubectl,
        dcgmi=dcgmi,
        timeout_seconds=timeout,
        execute=execute,
        exporter_per_instance=per_instance,
    )


@app.command("list")
def list_command(runbooks: RunbooksOption = None) -> None:
    """The runbooks: alert, severity and steps."""
    folder = _folder(runbooks)
    found, errors = load_runbooks(folder)
    rows = [(r.alert, r.severity, _counts(r)) for r in found]
    widths = [
        max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(("alert", "severity", "steps"))
    ]
    typer.echo(f"{'alert':<{widths[0]}}  {'severity':<{widths[1]}}  steps")
    for alert, severity, steps in rows:
        typer.echo(f"{alert:<{widths[0]}}  {severity:<{widths[1]}}  {steps}")
    for error in errors:
        typer.echo(f"servescope: error: {error}", err=True)
    if errors:
        raise typer.Exit(1)


def _step_line(step: Step, labels: dict[str, str]) -> tuple[str, bool]:
    """`[kind] id: title` and its bound call; False when a given label is invalid for it."""
    head = f"  [{step.kind}] {step.id}: {step.title}"
    missing = [name for name in step.labels if name not in labels]
    if missing:
        args = ", ".join(f"{k}={render(v)}" for k, v in step.params.items())
        need = " ".join(f"--label {m}=..." for m in missing)
        return f"{head}\n      {step.action}({args})   # needs {need}", True
    try:
        bound = bind_step(step, labels)
    except ParamError as exc:
        return f"{head}\n      ! {exc}", False
    args = ", ".join(f"{k}={v!r}" for k, v in bound.params.model_dump(exclude_unset=True).items())
    return f"{head}\n      {step.action}({args})", True


@app.command()
def show(
    alert: Annotated[str, typer.Argument(help="The alert's name, e.g. ServescopeGpuSaturated.")],
    label: LabelOption = None,
    runbooks: RunbooksOption = None,
) -> None:
    """A runbook: its prose and its steps, with their parameters bound from the labels given."""
    labels = _labels(label)
    runbook = _runbook(_folder(runbooks), alert)
    typer.echo(f"{runbook.alert} ({runbook.severity}): {runbook.summary}")
    typer.echo(f"file: {runbook.path}")
    valid = True
    order = [s for s in SECTIONS if s in runbook.sections] + [
        s for s in runbook.sections if s not in SECTIONS
    ]
    for section in order:
        typer.echo(f"\n## {section}")
        if runbook.sections[section]:
            typer.echo(runbook.sections[section])
        for step in (s for s in runbook.steps if s.section == section):
            line, ok = _step_line(step, labels)
            valid = valid and ok
            typer.echo(line)
    for step in (s for s in runbook.steps if s.section not in runbook.sections):
        line, ok = _step_line(step, labels)
        valid = valid and ok
        typer.echo(line)
    if not valid:
        raise typer.Exit(2)


def _safe_name(text: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", text)


def _print_text(report: Report, labels: dict[str, str], svg_dir: Path | None) -> None:
    for result in report.results:
        status = "OK" if result.ok else "FAILED"
        dry = " (dry run)" if result.dry_run and result.kind == "change" else ""
        typer.echo(f"== [{result.kind}] {result.step}: {result.title} ({result.action}) {status}{dry}")
        typer.echo("\n".join("   " + line if line else "" for line in result.output.splitlines()))
        if result.svg is not None:
            if svg_dir is not None:
                svg_dir.mkdir(parents=True, exist_ok=True)
                path = svg_dir / f"{_safe_name(result.step or 'step')}.svg"
                path.write_text(result.svg, encoding="utf-8")
                typer.echo(f"   SVG written to {path}")
            else:
                typer.echo(f"   (SVG of {len(result.svg)} bytes: --svg-dir DIR saves it, --json prints it)")
        typer.echo("")
    if report.not_run:
        typer.echo("Change steps (not run; run one with --step ID, dry unless --execute):")
        for step in report.not_run:
            typer.echo(_step_line(step, labels)[0])


def _json(report: Report, labels: dict[str, str]) -> str:
    payload: dict[str, Any] = {
        "alert": report.runbook.alert,
        "severity": report.runbook.severity,
        "labels": labels,
        "results": [r.model_dump(mode="json") for r in report.results],
        "not_run": [
            {
                "step": s.id,
                "kind": s.kind,
                "title": s.title,
                "action": s.action,
                "params": {k: render(v) for k, v in s.params.items()},
            }
            for s in report.not_run
        ],
    }
    return json.dumps(payload, indent=2, ensure_ascii=False)


@app.command("run")
def run_command(  # noqa: PLR0917 (typer: one parameter per option)
    alert: Annotated[str, typer.Argument(help="The alert's name, e.g. ServescopeGpuSaturated.")],
    step: Annotated[
        str | None,
        typer.Option("--step", help="Run only this step (a change step runs dry unless --execute)."),
    ] = None,
    label: LabelOption = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="Really run the change step named by --step (default: dry run).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the step results as JSON.")] = False,
    exporter_url: ExporterUrlOption = DEFAULT_EXPORTER_URL,
    prometheus_url: PrometheusUrlOption = None,
    alertmanager_url: AlertmanagerUrlOption = None,
    kubectl: KubectlOption = "kubectl",
    dcgmi: DcgmiOption = "dcgmi",
    timeout: TimeoutOption = 10.0,
    exporter_per_instance: PerInstanceOption = False,
    svg_dir: Annotated[
        Path | None, typer.Option("--svg-dir", help="Write SVGs (memory curves) here.")
    ] = None,
    runbooks: RunbooksOption = None,
) -> None:
    """Run an alert's read steps (change steps are listed), or one step with --step."""
    labels = _labels(label)
    if execute and step is None:
        raise _usage("--execute acts on one change step: name it with --step ID")
    ctx = _context(
        exporter_url,
        prometheus_url,
        alertmanager_url,
        kubectl,
        dcgmi,
        timeout,
        execute=execute,
        per_instance=exporter_per_instance,
    ).for_labels(labels)
    runbook = _runbook(_folder(runbooks), alert)
    try:
        report = run(runbook, labels, ctx, step)
    except (ParamError, UnknownStepError) as exc:
        raise _usage(str(exc)) from None
    if as_json:
        typer.echo(_json(report, labels))
    else:
        _print_text(report, labels, svg_dir)
    if not all(r.ok for r in report.results):
        raise typer.Exit(1)


def _token(token_file: Path | None) -> str | None:
    if token_file is not None:
        try:
            text = token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise _usage(f"--token-file {token_file}: cannot read: {exc}") from None
        if not text:
            raise _usage(f"--token-file {token_file}: the file is empty")
        return text
    return os.environ.get(ENV_TOKEN, "").strip() or None


def server_command(  # noqa: PLR0917 (typer: one parameter per option)
    listen: Annotated[
        str, typer.Option("--listen", help="HOST:PORT to serve on ([IPv6]:PORT, :PORT for all interfaces).")
    ] = "127.0.0.1:9110",
    runbooks: RunbooksOption = None,
    exporter_url: ExporterUrlOption = DEFAULT_EXPORTER_URL,
    prometheus_url: PrometheusUrlOption = None,
    alertmanager_url: AlertmanagerUrlOption = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            help=f"File holding the bearer token change steps need (else ${ENV_TOKEN}; "
            "with neither, change steps are refused).",
        ),
    ] = None,
    audit_log: Annotated[
        Path, typer.Option("--audit-log", help="JSON Lines file recording every change-step request.")
    ] = Path(DEFAULT_AUDIT_LOG),
    incidents_db: Annotated[
        Path,
        typer.Option("--incidents-db", help="SQLite file (WAL) keeping incidents and their step outputs."),
    ] = Path("servescope-incidents.sqlite"),
    webhook_token_file: Annotated[
        Path | None,
        typer.Option(
            "--webhook-token-file",
            help="File holding the bearer token Alertmanager sends (else $SERVESCOPE_WEBHOOK_TOKEN; "
            "neither: the webhook refuses every post).",
        ),
    ] = None,
    kubectl: KubectlOption = "kubectl",
    dcgmi: DcgmiOption = "dcgmi",
    timeout: TimeoutOption = 10.0,
    exporter_per_instance: PerInstanceOption = False,
) -> None:
    """Serve the runbooks to browsers: pages with Run buttons; change steps need a token and are audited.
    Also receives Alertmanager's webhook (POST /alertmanager/webhook) and keeps incidents (/incidents)."""
    import uvicorn

    from servescope.common.listen import ListenError, bind, bound_address, parse_listen
    from servescope.runbooks.audit import AuditLog
    from servescope.runbooks.incidents import IncidentStore
    from servescope.runbooks.server import create_runbook_app
    from servescope.runbooks.webhook import WebhookAuth, incident_router

    folder = _folder(runbooks)
    ctx = _context(
        exporter_url,
        prometheus_url,
        alertmanager_url,
        kubectl,
        dcgmi,
        timeout,
        per_instance=exporter_per_instance,
    )
    token = _token(token_file)
    try:
        sock = bind(parse_listen(listen))
    except (ValueError, ListenError) as exc:
        raise _usage(str(exc)) from None
    try:
        auth = (
            WebhookAuth.from_token_file(webhook_token_file) if webhook_token_file else WebhookAuth.from_env()
        )
    except (OSError, ValueError) as exc:
        raise _usage(f"--webhook-token-file: {exc}") from None
    store = IncidentStore(incidents_db)
    webhook = incident_router(store, folder, lambda: ctx, auth=auth)
    app = create_runbook_app(folder, ctx, token=token, audit=AuditLog(audit_log), incidents=store.latest)
    # Alertmanager posts here; read steps of firing alerts run in the router's bounded pool.
    app.include_router(webhook)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=3
    )
    changes = (
        "change steps need the token" if token else f"change steps refused (no --token-file, no ${ENV_TOKEN})"
    )
    hook = "webhook needs its token" if auth.token else "webhook refuses all (no --webhook-token-file)"
    typer.echo(
        f"servescope runbook server on {bound_address(sock)}\n  {changes}; audit log: {audit_log}\n"
        f"  {hook}; incidents: {incidents_db}"
    )
    sys.stdout.flush()
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        webhook.service.close()
        store.close()
