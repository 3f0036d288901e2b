"""One fenced `step` block of a runbook: its attributes and YAML body, checked against the action registry.

A step's action must exist and be of the step's kind (a step declared `read` can never run a change);
its parameters must be known, required ones given, literal values valid, and parameters that must be
literal (a PromQL query) not bound from labels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, get_args, get_type_hints

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from servescope.core.errors import first_reason
from servescope.runbooks.actions import Action, LiteralOnly
from servescope.runbooks.binding import TemplateError, parse_value, templates_in
from servescope.runbooks.model import STEP_ID, RunbookError, Step

_ATTRIBUTE = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_-]*)=("(?:[^"\\]|\\.)*"|[^\s"]+)')
_STEP_ATTRIBUTES = ("id", "kind", "title")


def parse_attributes(path: Path, line: int, text: str) -> dict[str, str]:
    attributes: dict[str, str] = {}
    position = 0
    while position < len(text):
        if not text[position:].strip():
            break
        found = _ATTRIBUTE.match(text, position)
        if found is None:
            raise RunbookError(
                path,
                line,
                f"step attributes: cannot read {text[position:].strip()[:40]!r} (write key=value, "
                'title="quoted text")',
            )
        key, raw = found.group(1), found.group(2)
        if key not in _STEP_ATTRIBUTES:
            raise RunbookError(path, line, f"step: unknown attribute {key!r} (attributes: id, kind, title)")
        if key in attributes:
            raise RunbookError(path, line, f"step: attribute {key!r} given twice")
        if raw.startswith('"'):
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        attributes[key] = raw
        position = found.end()
    for key in _STEP_ATTRIBUTES:
        if key not in attributes:
            raise RunbookError(path, line, f"step: missing attribute {key}= (a step has id, kind and title)")
    if STEP_ID.fullmatch(attributes["id"]) is None:
        raise RunbookError(
            path, line, f"step id {attributes['id']!r}: use lowercase-kebab-case (a-z, 0-9, -)"
        )
    if attributes["kind"] not in ("read", "change"):
        raise RunbookError(path, line, f"step {attributes['id']}: kind must be read or change")
    if not attributes["title"].strip():
        raise RunbookError(path, line, f"step {attributes['id']}: empty title")
    return attributes


def _param_lines(body: str, first_line: int) -> dict[str, int]:
    """The file line of each key under `params:` (for messages)."""
    try:
        node = yaml.compose(body)
    except yaml.YAMLError:
        return {}
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if getattr(key, "value", None) == "params" and isinstance(value, yaml.MappingNode):
                for param, _ in value.value:
                    if isinstance(param, yaml.ScalarNode):
                        lines[str(param.value)] = first_line + param.start_mark.line
    return lines


def parse_step(
    path: Path, line: int, attributes: dict[str, str], body_lines: list[str], section: str
) -> Step:
    body = "\n".join(body_lines)
    step_id = attributes["id"]
    try:
        data = yaml.safe_load(body)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = line + 1 + (mark.line if mark is not None else 0)
        hint = ' (quote templates: gpu: "{{ labels.gpu }}")' if "{{" in body else ""
        raise RunbookError(
            path, at, f"step {step_id}: body is not YAML: {getattr(exc, 'problem', exc)}{hint}"
        ) from None
    if not isinstance(data, dict):
        raise RunbookError(path, line, f"step {step_id}: body must be a mapping with `action` and `params`")
    for key in data:
        if key not in ("action", "params"):
            raise RunbookError(path, line, f"step {step_id}: unknown key {key!r} (keys: action, params)")
    action = data.get("action")
    if not isinstance(action, str) or not action:
        raise RunbookError(path, line + 1, f"step {step_id}: `action` must name an action")
    raw_params = data.get("params") or {}
    if not isinstance(raw_params, dict):
        raise RunbookError(path, line + 1, f"step {step_id}: `params` must be a mapping")
    param_lines = _param_lines(body, line + 1)
    params: dict[str, Any] = {}
    for name, value in raw_params.items():
        at = param_lines.get(str(name), line)
        if not isinstance(name, str):
            raise RunbookError(path, at, f"step {step_id}: parameter names must be strings, got {name!r}")
        try:
            params[name] = parse_value(value, f"step {step_id}: params.{name}")
        except TemplateError as exc:
            raise RunbookError(path, at, str(exc)) from None
    return Step(step_id, attributes["kind"], attributes["title"], action, params, line, section, param_lines)


def _error_text(exc: ValidationError) -> str:
    where = ".".join(str(p) for p in exc.errors()[0]["loc"])
    return f"{where}: {first_reason(exc)}" if where else first_reason(exc)


def _field_type(info: FieldInfo) -> Any:
    """A field's type with its constraints, to validate one literal value on its own."""
    if not info.metadata:
        return info.annotation
    annotated: Any = Annotated
    return annotated[(info.annotation, *info.metadata)]


def _extra_type(model: type[BaseModel]) -> Any:
    """The type of a model's extra fields when it takes them (`extra="allow"`), else None."""
    if model.model_config.get("extra") != "allow":
        return None
    hint = get_type_hints(model, include_extras=True).get("__pydantic_extra__")
    args = get_args(hint)
    return args[1] if len(args) == 2 else Any


def _check_param(path: Path, step: Step, action: Action[Any], name: str, value: Any) -> None:
    at = step.param_lines.get(name, step.line)
    templated = templates_in(value)
    fields = action.params.model_fields
    extra = _extra_type(action.params)
    if name not in fields and extra is None:
        raise RunbookError(
            path,
            at,
            f"step {step.id}: {step.action} has no parameter {name!r} "
            f"(parameters: {', '.join(fields) or 'none'})",
        )
    if name in fields and templated and any(isinstance(m, LiteralOnly) for m in fields[name].metadata):
        raise RunbookError(
            path, at, f"step {step.id}: parameter {name!r} must be written literally, not bound from a label"
        )
    if templated:
        return
    # extra parameters (promql's placeholder values) are typed like the model's declared extras
    adapter: TypeAdapter[Any] = TypeAdapter(_field_type(fields[name]) if name in fields else extra)
    try:
        adapter.validate_python(value)
    except ValidationError as exc:
        raise RunbookError(path, at, f"step {step.id}: parameter {name!r}: {_error_text(exc)}") from None


def check_step(path: Path, step: Step, actions: Mapping[str, Action[Any]]) -> None:
    """The step against its action: kind, parameter names, required ones, literal values, literal-only."""
    action = actions.get(step.action)
    if action is None:
        raise RunbookError(
            path,
            step.line + 1,
            f"step {step.id}: unknown action {step.action!r} (actions: {', '.join(sorted(actions))})",
        )
    if action.kind != step.kind:
        raise RunbookError(
            path,
            step.line,
            f"step {step.id}: kind={step.kind} but action {step.action} is a {action.kind} action",
        )
    fields = action.params.model_fields
    for name, value in step.params.items():
        _check_param(path, step, action, name, value)
    for name, info in fields.items():
        if info.is_required() and name not in step.params:
            raise RunbookError(path, step.line, f"step {step.id}: {step.action} needs parameter {name!r}")
    if not any(templates_in(v) for v in step.params.values()):
        try:
            action.params.model_validate(step.params)
        except ValidationError as exc:
            raise RunbookError(path, step.line, f"step {step.id}: {_error_text(exc)}") from None
