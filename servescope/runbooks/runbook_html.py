"""The HTML of the runbook pages: the index, and one runbook with its steps bound to the alert's labels.

The pages are templates (templates/index.html, runbook.html, step.html); this module works out what they
show. Every value reaches the page escaped by the template engine (core/html.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from servescope.core.html import Markup
from servescope.runbooks.document import Runbook, RunbookError, Step
from servescope.runbooks.markdown import markdown
from servescope.runbooks.runner import CallPreview, preview
from servescope.runbooks.shell import body


def index_html(found: list[Runbook], errors: list[RunbookError]) -> Markup:
    return body("index.html", found=found, errors=errors)


def _why_unbound(call: CallPreview) -> str | None:
    """Why the call's parameters cannot be bound, or None where they are."""
    if call.missing:
        names = ", ".join(f"'{m}'" for m in call.missing)
        return f"needs the alert label(s) {names}, not given"
    return call.error if call.params is None else None


def _call_text(call: CallPreview) -> str:
    """The step's call as text with its parameters bound, or as written and why not."""
    if call.missing:
        return f"{call.written()}\n{_why_unbound(call)}"
    if call.params is None:
        return call.error
    return call.bound(call.params.model_dump(mode="json"))


@dataclass(frozen=True)
class StepView:
    """What templates/step.html shows of one step."""

    id: str
    kind: str
    title: str
    url: str
    call: str  # bound (every parameter, defaults too), or as written and why not
    why: str | None  # why the parameters cannot be bound; None where they are
    written: str  # the call as the runbook writes it, shown where a label is missing


def step_view(alert: str, step: Step, labels: dict[str, str]) -> StepView:
    call = preview(step, labels)  # binds the parameters once for the page and the button
    return StepView(
        step.id,
        step.kind,
        step.title,
        f"{alert}/steps/{step.id}/run",
        _call_text(call),
        _why_unbound(call),
        call.written() if call.missing else "",
    )


def _incident_row(incident: dict[str, Any]) -> dict[str, Any]:
    url = str(incident.get("url") or "")
    labels = incident.get("labels") or {}
    shown = ", ".join(f"{k}={v}" for k, v in labels.items()) if isinstance(labels, dict) else str(labels)
    return {
        "id": incident.get("id", ""),
        "url": url,
        "linked": url.startswith(("http://", "https://", "/")),
        "status": incident.get("status", ""),
        "starts_at": incident.get("starts_at", ""),
        "labels": shown,
    }


@dataclass(frozen=True)
class SectionView:
    name: str
    prose: Markup
    steps: list[StepView]


def runbook_html(
    runbook: Runbook, labels: dict[str, str], incidents: list[dict[str, Any]] | None, nonce: str
) -> Markup:
    def steps(chosen: list[Step]) -> list[StepView]:
        return [step_view(runbook.alert, s, labels) for s in chosen]

    sections = [
        SectionView(
            name, markdown(runbook.sections[name]), steps([s for s in runbook.steps if s.section == name])
        )
        for name in runbook.section_order()
    ]
    memory_url = f"{runbook.alert}/memory.svg?gpu={quote(labels.get('gpu', ''), safe='')}"
    return body(
        "runbook.html",
        runbook=runbook,
        labels=labels,
        memory_url=memory_url,
        incidents=None if incidents is None else [_incident_row(i) for i in incidents],
        sections=sections,
        unsectioned=steps([s for s in runbook.steps if s.section not in runbook.sections]),
        nonce=nonce,
    )
