"""`servescope runbook list|show|run`: the executable runbooks of the alerts.

Their options come from the runbook settings (`settings.py`) through the one settings bridge, so the
flags, the SERVESCOPE_RUNBOOK_* variables and the configuration reference cannot drift apart.

Exit status: 0 when every step that ran succeeded, 1 when a step failed (or a runbook file is broken),
2 for a usage error: unknown alert or step, a label missing or invalid for a parameter, a bad option.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel

from servescope.core.cli_errors import usage_error
from servescope.core.settings_cli import settings_command
from servescope.runbooks.audit_cli import app as audit_app
from servescope.runbooks.audit_cli import audited_execute
from servescope.runbooks.cli_output import print_list, print_report, print_runbook, report_json
from servescope.runbooks.document import is_label_name, load_runbook, load_runbooks
from servescope.runbooks.model import Runbook, RunbookError, UnknownAlertError
from servescope.runbooks.runner import ParamError, UnknownStepError, run
from servescope.runbooks.settings import FolderSettings, StepSettings

app = typer.Typer(
    help="Executable runbooks: one per alert, read steps run, change steps dry-run unless --execute.",
    no_args_is_help=True,
    add_completion=False,
)


def _parameter(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


ALERT = _parameter(
    "alert", Annotated[str, typer.Argument(help="The alert's name, e.g. ServescopeGpuSaturated.")]
)
LABEL = _parameter(
    "label",
    Annotated[
        list[str] | None,
        typer.Option(
            "--label", "-l", help="An alert label as name=value (repeat it); templates bind from these."
        ),
    ],
    None,
)
RUN_OPTIONS = (
    _parameter(
        "step",
        Annotated[
            str | None,
            typer.Option("--step", help="Run only this step (a change step runs dry unless --execute)."),
        ],
        None,
    ),
    _parameter(
        "execute",
        Annotated[
            bool,
            typer.Option("--execute", help="Really run the change step named by --step (default: dry run)."),
        ],
        False,
    ),
    _parameter(
        "as_json", Annotated[bool, typer.Option("--json", help="Print the step results as JSON.")], False
    ),
    _parameter(
        "svg_dir",
        Annotated[Path | None, typer.Option("--svg-dir", help="Write SVGs (memory curves) here.")],
        None,
    ),
)


def folder_of(models: dict[type[BaseModel], BaseModel]) -> FolderSettings:
    settings = models[FolderSettings]
    assert isinstance(settings, FolderSettings)
    return settings


def _runbook(pages: FolderSettings, alert: str) -> Runbook:
    try:
        return load_runbook(pages.folder(), alert, pages.config())
    except UnknownAlertError as exc:
        usage_error(str(exc))
    except RunbookError as exc:
        usage_error(str(exc), 1)


def labels_of(pairs: list[str] | None) -> dict[str, str]:
    """--label name=value pairs as a mapping; a usage error for a bad or repeated one."""
    labels: dict[str, str] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not is_label_name(name):
            usage_error(
                f"--label {pair[:60]!r}: expected name=value with a label name ([a-zA-Z_][a-zA-Z0-9_]*)"
            )
        if name in labels:
            usage_error(f"--label {name}: given twice")
        labels[name] = value
    return labels


def _list(models: dict[type[BaseModel], BaseModel], _: dict[str, Any]) -> None:
    pages = folder_of(models)
    found, errors = load_runbooks(pages.folder(), pages.config())
    print_list(found, errors)
    if errors:
        raise typer.Exit(1)


def _show(models: dict[type[BaseModel], BaseModel], given: dict[str, Any]) -> None:
    labels = labels_of(given["label"])
    runbook = _runbook(folder_of(models), given["alert"])
    if not print_runbook(runbook, labels):
        raise typer.Exit(2)


def _run(models: dict[type[BaseModel], BaseModel], given: dict[str, Any]) -> None:
    labels = labels_of(given["label"])
    if given["execute"] and given["step"] is None:
        usage_error("--execute acts on one change step: name it with --step ID")
    steps = models[StepSettings]
    assert isinstance(steps, StepSettings)
    pages = folder_of(models)
    ctx = steps.context(execute=given["execute"]).model_copy(update={"alerts": pages.config()})
    ctx = ctx.for_labels(labels)
    runbook = _runbook(pages, given["alert"])
    try:
        if given["execute"]:
            run(runbook, labels, ctx.model_copy(update={"execute": False}), given["step"], bind_only=True)
            report = audited_execute(
                steps.audit_log,
                runbook.alert,
                given["step"],
                labels,
                lambda: run(runbook, labels, ctx, given["step"]),
            )
        else:
            report = run(runbook, labels, ctx, given["step"])
    except (ParamError, UnknownStepError) as exc:
        usage_error(str(exc))
    if given["as_json"]:
        typer.echo(report_json(report, labels))
    else:
        print_report(report, labels, given["svg_dir"])
    if not all(r.ok for r in report.results):
        raise typer.Exit(1)


app.command("list")(settings_command([FolderSettings], _list, doc="The runbooks: alert, severity and steps."))
app.command("show")(
    settings_command(
        [FolderSettings],
        _show,
        doc="A runbook: its prose and its steps, with their parameters bound from the labels given.",
        extra=(ALERT, LABEL),
    )
)
app.command("run")(
    settings_command(
        [StepSettings, FolderSettings],
        _run,
        doc="Run an alert's read steps (change steps are listed), or one step with --step.",
        extra=(ALERT, *RUN_OPTIONS[:1], LABEL, *RUN_OPTIONS[1:]),
    )
)
app.add_typer(audit_app, name="audit")
