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

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from servescope.core.config import AlertsConfig
from servescope.core.config_text import ConfigTextError, render_config
from servescope.core.errors import first_reason
from servescope.runbooks.actions import ACTIONS, Action
from servescope.runbooks.binding import LABEL_NAME, Template
from servescope.runbooks.markdown import FENCE, HEADING
from servescope.runbooks.model import (
    ALERT_NAME,
    SECTIONS,
    SEVERITIES,
    Runbook,
    RunbookError,
    Step,
    UnknownAlertError,
)
from servescope.runbooks.settings import ENV_RUNBOOKS, SHIPPED_RUNBOOKS, FolderSettings
from servescope.runbooks.step_block import check_step, parse_attributes, parse_step

_FRONT_KEYS = ("alert", "severity", "summary")
# The thresholds a page shows when the service is given no --alerts-config: the rules' defaults.
DEFAULT_CONFIG = AlertsConfig()


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
            fence = FENCE.match(lines[i])
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
        attributes = parse_attributes(self.path, i + 1, info[len("step") :])
        step = parse_step(self.path, i + 1, attributes, lines[i + 1 : end], self.section)
        if any(s.id == step.id for s in self.steps):
            raise RunbookError(self.path, i + 1, f"step id {step.id!r} is used twice")
        check_step(self.path, step, self.actions)
        self.steps.append(step)
        return end + 1

    def _line(self, line: str, line_no: int) -> None:
        heading = HEADING.match(line)
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


def read_page(path: Path, config: AlertsConfig = DEFAULT_CONFIG, text: str | None = None) -> str:
    """A runbook file's text (or `text`) with its `{{ config.x }}` thresholds filled in from `config`."""
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RunbookError(path, 0, f"cannot read: {exc}") from None
    try:
        return render_config(text, config)
    except ConfigTextError as exc:
        raise RunbookError(path, exc.line, exc.message) from None


def parse_runbook(
    path: Path,
    text: str | None = None,
    actions: Mapping[str, Action[Any]] = ACTIONS,
    config: AlertsConfig = DEFAULT_CONFIG,
) -> Runbook:
    """Parse and check one runbook file (or `text`, reported as `path`), its thresholds from `config`."""
    lines = read_page(path, config, text).splitlines()
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
    try:
        settings = FolderSettings() if option is None else FolderSettings(runbooks=option)
    except ValidationError as exc:
        raise UnknownAlertError(f"--runbooks {first_reason(exc)}") from None
    return settings.folder()


def runbook_paths(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.md") if p.name.lower() != "readme.md")


def load_runbooks(
    folder: Path, config: AlertsConfig = DEFAULT_CONFIG
) -> tuple[list[Runbook], list[RunbookError]]:
    """Every runbook in the folder, and the errors of those that could not be used."""
    found: list[Runbook] = []
    errors: list[RunbookError] = []
    for path in runbook_paths(folder):
        try:
            found.append(parse_runbook(path, config=config))
        except RunbookError as exc:
            errors.append(exc)
    return found, errors


def load_runbook(folder: Path, alert: str, config: AlertsConfig = DEFAULT_CONFIG) -> Runbook:
    """The runbook of one alert; UnknownAlertError names the alerts that have one."""
    path = folder / f"{alert}.md"
    if ALERT_NAME.fullmatch(alert) is None or path not in runbook_paths(folder):
        known = ", ".join(p.stem for p in runbook_paths(folder)) or "none"
        raise UnknownAlertError(f"no runbook for alert {alert[:80]!r} in {folder} (runbooks: {known})")
    return parse_runbook(path, config=config)


def is_label_name(name: str) -> bool:
    return LABEL_NAME.fullmatch(name) is not None and name.isascii()


__all__ = [
    "DEFAULT_CONFIG",
    "ENV_RUNBOOKS",
    "SECTIONS",
    "SEVERITIES",
    "SHIPPED_RUNBOOKS",
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
    "read_page",
    "runbook_paths",
    "runbooks_dir",
]
