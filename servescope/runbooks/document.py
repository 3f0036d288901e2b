"""`runbooks/<AlertName>.md`: YAML front matter, Markdown prose, fenced `step` blocks → dataclasses.

    ---
    alert: ServescopeGpuSaturated
    severity: warning
    summary: A GPU has been compute-saturated for a sustained period.
    ---
    # ServescopeGpuSaturated
    ## Meaning / ## Impact / ## Diagnosis / ## Mitigation   (prose, then step blocks)

    ```step id=gpu-snapshot kind=read title="Look at the GPU's state"
    action: gpu_snapshot
    params:
      gpu: "{{ labels.gpu }}"
    ```

Every error names the file and the line (`path:line: message`). A runbook is checked against the action
registry when it is loaded: the action exists, the step's kind is the action's kind (a step declared
`read` can never run a change), parameters are known, required ones are given, literal values are valid,
and parameters that must be literal (a PromQL query) are not bound from labels.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, get_args, get_type_hints

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from servescope.runbooks.actions import ACTIONS, Action, LiteralOnly
from servescope.runbooks.binding import LABEL_NAME, Template, TemplateError, parse_value, templates_in

SEVERITIES = ("critical", "warning", "info")
SECTIONS = ("Meaning", "Impact", "Diagnosis", "Mitigation")
STEP_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
ALERT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
ENV_RUNBOOKS = "SERVESCOPE_RUNBOOKS"
# The Markdown runbooks are package data: an installed servescope finds them without a checkout.
SHIPPED_RUNBOOKS = Path(__file__).resolve().parent / "pages"
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ATTRIBUTE = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_-]*)=("(?:[^"\\]|\\.)*"|[^\s"]+)')
_STEP_ATTRIBUTES = ("id", "kind", "title")
_FRONT_KEYS = ("alert", "severity", "summary")


class RunbookError(ValueError):
    """A runbook that cannot be used; the message starts with `path:line: `."""

    def __init__(self, path: Path | str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line, self.message = Path(path), line, message


class UnknownAlertError(LookupError):
    """No runbook for that alert name."""


@dataclass(frozen=True)
class Step:
    id: str
    kind: str  # read | change
    title: str
    action: str
    params: dict[str, Any]  # literals and Templates
    line: int  # the opening fence
    section: str
    param_lines: dict[str, int] = field(default_factory=dict)

    @property
    def labels(self) -> list[str]:
        """The alert labels the step's templates take, in order, once each."""
        names = [t.label for value in self.params.values() for t in templates_in(value)]
        return list(dict.fromkeys(names))


@dataclass(frozen=True)
class Runbook:
    alert: str
    severity: str
    summary: str
    path: Path
    title: str
    sections: dict[str, str]  # heading -> prose (step blocks left out)
    steps: tuple[Step, ...]

    def step(self, step_id: str) -> Step | None:
        return next((s for s in self.steps if s.id == step_id), None)

    @property
    def read_steps(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "read"]

    @property
    def change_steps(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "change"]


def _front_matter(path: Path, lines: list[str]) -> tuple[dict[str, Any], int]:
    """The front matter mapping and the index of the first line after it."""
    if not lines or lines[0].strip() != "---":
        raise RunbookError(path, 1, "expected YAML front matter: a first line `---`")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise RunbookError(path, 1, "front matter is not closed by a `---` line")
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = 2 + (mark.line if mark is not None else 0)
        raise RunbookError(path, line, f"front matter is not YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise RunbookError(path, 2, "front matter must be a mapping (alert, severity, summary)")
    for key in data:
        if key not in _FRONT_KEYS:
            raise RunbookError(path, 2, f"front matter: unknown key {key!r} (keys: {', '.join(_FRONT_KEYS)})")
    for key in _FRONT_KEYS:
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise RunbookError(path, 2, f"front matter: `{key}` must be a non-empty string")
    if data["severity"] not in SEVERITIES:
        raise RunbookError(path, 2, f"front matter: severity {data['severity']!r} is not one of {SEVERITIES}")
    if ALERT_NAME.fullmatch(data["alert"]) is None:
        raise RunbookError(path, 2, f"front matter: alert {data['alert']!r} is not an alert name")
    return data, end + 1


def _attributes(path: Path, line: int, text: str) -> dict[str, str]:
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


def _step(path: Path, line: int, attributes: dict[str, str], body_lines: list[str], section: str) -> Step:
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
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


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


class _Body:
    """Walks the Markdown after the front matter: title, sections and their prose, step blocks."""

    def __init__(self, path: Path, alert: str, actions: Mapping[str, Action[Any]]) -> None:
        self.path, self.alert, self.actions = path, alert, actions
        self.title = ""
        self.section = ""
        self.sections: dict[str, list[str]] = {}
        self.steps: list[Step] = []

    def walk(self, lines: list[str], start: int) -> None:
        i = start
        while i < len(lines):
            fence = _FENCE.match(lines[i])
            if fence is not None and not (fence.group(1)[0] == "`" and "`" in fence.group(2)):
                i = self._fenced(lines, i, fence.group(1), fence.group(2).strip())
            else:
                self._line(lines[i], i + 1)
                i += 1

    def _fenced(self, lines: list[str], i: int, marker: str, info: str) -> int:
        """Handle the block opening at index i; the index after its closing fence."""
        closing = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}\s*$")
        end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), len(lines))
        if (info.split(maxsplit=1) or [""])[0] != "step":
            self.sections.setdefault(self.section, []).extend(lines[i : end + 1])
            return end + 1
        if end == len(lines):
            raise RunbookError(self.path, i + 1, "step block is not closed")
        attributes = _attributes(self.path, i + 1, info[len("step") :])
        step = _step(self.path, i + 1, attributes, lines[i + 1 : end], self.section)
        if any(s.id == step.id for s in self.steps):
            raise RunbookError(self.path, i + 1, f"step id {step.id!r} is used twice")
        check_step(self.path, step, self.actions)
        self.steps.append(step)
        return end + 1

    def _line(self, line: str, line_no: int) -> None:
        heading = _HEADING.match(line)
        level = len(heading.group(1)) if heading is not None else 0
        if heading is not None and level == 1 and not self.title:
            self.title = heading.group(2)
            if self.title != self.alert:
                raise RunbookError(
                    self.path, line_no, f"the title must be `# {self.alert}`, got {self.title!r}"
                )
        elif heading is not None and level == 2:
            self.section = heading.group(2)
            self.sections.setdefault(self.section, [])
        else:
            self.sections.setdefault(self.section, []).append(line)


def parse_runbook(
    path: Path, text: str | None = None, actions: Mapping[str, Action[Any]] = ACTIONS
) -> Runbook:
    """Parse and check one runbook file (or `text`, reported as `path`)."""
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RunbookError(path, 0, f"cannot read: {exc}") from None
    lines = text.splitlines()
    front, start = _front_matter(path, lines)
    if path.suffix == ".md" and path.stem != front["alert"]:
        raise RunbookError(path, 2, f"alert {front['alert']!r} must be the file's name ({path.stem}.md)")
    body = _Body(path, front["alert"], actions)
    body.walk(lines, start)
    if not body.title:
        raise RunbookError(path, start + 1, f"missing the title `# {front['alert']}`")
    missing = [name for name in SECTIONS if name not in body.sections]
    if missing:
        raise RunbookError(path, len(lines), f"missing section(s): {', '.join('## ' + m for m in missing)}")
    if not any(s.kind == "read" for s in body.steps):
        raise RunbookError(path, len(lines), "a runbook needs at least one read step")
    prose = {name: "\n".join(text).strip() for name, text in body.sections.items() if name}
    return Runbook(
        front["alert"], front["severity"], front["summary"], path, body.title, prose, tuple(body.steps)
    )


def runbooks_dir(option: Path | None = None) -> Path:
    """--runbooks (or SERVESCOPE_RUNBOOKS), else the runbooks shipped with the package."""
    if option is None and os.environ.get(ENV_RUNBOOKS):
        option = Path(os.environ[ENV_RUNBOOKS])
    if option is not None:
        if not option.is_dir():
            raise UnknownAlertError(f"--runbooks {option}: not a folder")
        return option
    return SHIPPED_RUNBOOKS


def runbook_paths(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.md") if p.name.lower() != "readme.md")


def load_runbooks(folder: Path) -> tuple[list[Runbook], list[RunbookError]]:
    """Every runbook in the folder, and the errors of those that could not be used."""
    found: list[Runbook] = []
    errors: list[RunbookError] = []
    for path in runbook_paths(folder):
        try:
            found.append(parse_runbook(path))
        except RunbookError as exc:
            errors.append(exc)
    return found, errors


def load_runbook(folder: Path, alert: str) -> Runbook:
    """The runbook of one alert; UnknownAlertError names the alerts that have one."""
    path = folder / f"{alert}.md"
    if ALERT_NAME.fullmatch(alert) is None or path not in runbook_paths(folder):
        known = ", ".join(p.stem for p in runbook_paths(folder)) or "none"
        raise UnknownAlertError(f"no runbook for alert {alert[:80]!r} in {folder} (runbooks: {known})")
    return parse_runbook(path)


def is_label_name(name: str) -> bool:
    return LABEL_NAME.fullmatch(name) is not None and name.isascii()


__all__ = [
    "SECTIONS",
    "SEVERITIES",
    "Runbook",
    "RunbookError",
    "Step",
    "Template",
    "UnknownAlertError",
    "check_step",
    "is_label_name",
    "load_runbook",
    "load_runbooks",
    "parse_runbook",
    "runbook_paths",
    "runbooks_dir",
]
