"""What a runbook is once read: its alert, severity, summary, sections and steps, and the errors."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servescope.core.errors import ServescopeError
from servescope.runbooks.binding import templates_in

SEVERITIES = ("critical", "warning", "info")
SECTIONS = ("Meaning", "Impact", "Diagnosis", "Mitigation")
STEP_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
ALERT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


class RunbookError(ServescopeError, ValueError):
    """A runbook that cannot be used; the message starts with `path:line: `."""

    reason = "runbook_invalid"

    def __init__(self, path: Path | str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line, self.message = Path(path), line, message


class UnknownAlertError(ServescopeError, LookupError):
    """No runbook for that alert name."""

    reason = "unknown_alert"


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

    def section_order(self) -> list[str]:
        """The four standard sections first, in their order, then the runbook's others."""
        return [s for s in SECTIONS if s in self.sections] + [s for s in self.sections if s not in SECTIONS]

    @property
    def read_steps(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "read"]

    @property
    def change_steps(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "change"]
