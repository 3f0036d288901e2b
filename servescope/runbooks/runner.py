"""Bind a runbook's steps to an alert's labels, validate them, and run them.

Without a step id every read step runs (all are bound and validated first: one bad label stops the run
before anything is read); change steps are only listed. One step, by id, runs alone; a change step runs
dry unless the context says execute, which is only allowed for one named step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from servescope.core.errors import ServescopeError, first_reason
from servescope.runbooks.actions import ACTIONS, Action, Params, RunContext, StepResult
from servescope.runbooks.binding import BindingError, Template, bind, render
from servescope.runbooks.document import Runbook, Step


class ParamError(ServescopeError, ValueError):
    """A step that cannot run with these labels: a missing label or an invalid parameter (named)."""

    reason = "param_invalid"


class UnknownStepError(ServescopeError, LookupError):
    reason = "unknown_step"


@dataclass(frozen=True)
class Bound:
    step: Step
    action: Action[Any]
    params: Params


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 70 else text[:60] + f"... ({len(str(value))} characters)"


def describe(step: Step, exc: ValidationError, bound: Mapping[str, Any]) -> str:
    """One line naming the parameter, the label it came from and what was wrong."""
    error = exc.errors()[0]
    loc = [str(p) for p in error["loc"]]
    message = first_reason(exc)
    if not loc:
        return f"step {step.id}: invalid parameters: {message}"
    name = loc[0]
    source = step.params.get(name)
    origin = ""
    if isinstance(source, Template):
        origin = f" (from label '{source.label}' = {_shown(bound.get(name))})"
    elif name in bound:
        origin = f" (= {_shown(bound[name])})"
    if error["type"] == "missing":
        return f"step {step.id}: missing parameter '{name}'"
    if error["type"] == "extra_forbidden":
        return f"step {step.id}: unknown parameter '{name}'"
    where = ".".join(loc)
    return f"step {step.id}: invalid parameter '{where}'{origin}: {message}"


def bind_step(step: Step, labels: Mapping[str, str]) -> Bound:
    """The step's parameters from the labels, validated by its action's typed model."""
    action = ACTIONS[step.action]
    try:
        values = bind(step.params, labels, f"step {step.id}")
    except BindingError as exc:
        raise ParamError(str(exc)) from None
    try:
        params = action.params.model_validate(values)
    except ValidationError as exc:
        raise ParamError(describe(step, exc, values)) from None
    return Bound(step, action, params)


@dataclass(frozen=True)
class CallPreview:
    """A step's call as shown before it runs: bound to the labels, or as written and why not."""

    step: Step
    missing: tuple[str, ...] = ()
    params: Params | None = None
    error: str = ""

    def written(self) -> str:
        """The call with its templates as the runbook writes them."""
        args = ", ".join(f"{k}={render(v)}" for k, v in self.step.params.items())
        return f"{self.step.action}({args})"

    def bound(self, values: Mapping[str, Any]) -> str:
        """The call with these bound values."""
        return f"{self.step.action}({', '.join(f'{k}={v!r}' for k, v in values.items())})"


def preview(step: Step, labels: Mapping[str, str]) -> CallPreview:
    """The labels the step needs and lacks, else its bound parameters, else why a label is invalid."""
    missing = tuple(name for name in step.labels if name not in labels)
    if missing:
        return CallPreview(step, missing=missing)
    try:
        return CallPreview(step, params=bind_step(step, labels).params)
    except ParamError as exc:
        return CallPreview(step, error=str(exc))


def run_bound(bound: Bound, ctx: RunContext) -> StepResult:
    """Run one bound step; the result carries the step's id, kind, action and parameters."""
    if bound.step.kind == "read":
        ctx = ctx.model_copy(update={"execute": False})
    result = bound.action.run(bound.params, ctx)
    return result.model_copy(
        update={
            "step": bound.step.id,
            "kind": bound.step.kind,
            "action": bound.action.name,
            "params": bound.params.model_dump(mode="json"),
            "title": bound.step.title,
        }
    )


@dataclass(frozen=True)
class Report:
    runbook: Runbook
    results: list[StepResult]
    not_run: list[Step]  # change steps, listed only


def select(runbook: Runbook, step_id: str | None) -> list[Step]:
    if step_id is None:
        return runbook.read_steps
    step = runbook.step(step_id)
    if step is None:
        known = ", ".join(f"{s.id} ({s.kind})" for s in runbook.steps)
        raise UnknownStepError(f"{runbook.alert} has no step {step_id[:80]!r} (steps: {known})")
    return [step]


def run(
    runbook: Runbook,
    labels: Mapping[str, str],
    ctx: RunContext,
    step_id: str | None = None,
    *,
    bind_only: bool = False,
) -> Report:
    """Every read step (change steps listed), or the one step named; all bound before any runs (with
    `bind_only`, nothing runs: ParamError or UnknownStepError say what would stop it)."""
    if ctx.execute and step_id is None:
        raise ParamError("--execute acts on one change step: name it with --step ID")
    steps = select(runbook, step_id)
    bound = [bind_step(step, labels) for step in steps]
    if bind_only:
        return Report(runbook, [], [])
    results = [run_bound(b, ctx) for b in bound]
    not_run = runbook.change_steps if step_id is None else []
    return Report(runbook, results, not_run)
