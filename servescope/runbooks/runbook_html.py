"""The HTML of the runbook pages: the index, and one runbook with its steps bound to the alert's labels."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from servescope.common.html import esc
from servescope.runbooks.document import Runbook, RunbookError, Step
from servescope.runbooks.markdown import markdown
from servescope.runbooks.runner import CallPreview, preview
from servescope.runbooks.shell import RUNBOOK_SCRIPT


def index_html(found: list[Runbook], errors: list[RunbookError]) -> str:
    rows = "".join(
        f'<tr><td><a href="runbooks/{esc(r.alert)}">{esc(r.alert)}</a></td>'
        f'<td class="severity-{esc(r.severity)}">{esc(r.severity)}</td>'
        f"<td>{esc(r.summary)}</td>"
        f"<td>{len(r.read_steps)} read, {len(r.change_steps)} change</td></tr>"
        for r in found
    )
    broken = "".join(f"<li>{esc(e)}</li>" for e in errors)
    return (
        "<h1>servescope runbooks</h1>"
        "<p>One per alert. Open one from the alert's <code>runbook_url</code> to bind its steps to the "
        "alert's labels.</p>"
        f"<table><tr><th>alert</th><th>severity</th><th>summary</th><th>steps</th></tr>{rows}</table>"
        + (f'<h2>Broken runbooks</h2><ul class="missing">{broken}</ul>' if broken else "")
    )


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


def _bound_call(call: CallPreview) -> str:
    """The step's call with every parameter bound (defaults too), or why they cannot be."""
    why = _why_unbound(call)
    if why is None:
        return f"<pre>{esc(_call_text(call))}</pre>"
    shown = f"<pre>{esc(call.written())}</pre>" if call.missing else ""
    return f'{shown}<p class="missing">{esc(why)}</p>'


def _controls(alert: str, call: CallPreview) -> str:
    step = call.step
    sid = esc(step.id)
    url = esc(f"{alert}/steps/{step.id}/run")
    # What the Execute confirmation shows: the call with every bound parameter (a crafted link's too).
    text = esc(_call_text(call))
    button = (
        f'<button class="run" id="run-{sid}" data-step="{sid}" data-kind="{esc(step.kind)}" '
        f'data-url="{url}" data-call="{text}">'
    )
    if step.kind == "change":
        return (
            f"{button}Dry run</button> "
            f'<label><input type="checkbox" class="execute" id="exec-{sid}" data-step="{sid}"> '
            "execute</label>"
        )
    return f"{button}Run</button>"


def step_html(alert: str, step: Step, labels: dict[str, str]) -> str:
    sid = esc(step.id)
    call = preview(step, labels)  # binds the parameters once for the page and the button
    return (
        f'<div class="step {esc(step.kind)}" id="step-{sid}">'
        f'<h4><span class="kind">{esc(step.kind)}</span> {esc(step.title)} '
        f"<small>({sid})</small></h4>{_bound_call(call)}{_controls(alert, call)}"
        f'<pre class="output" id="out-{sid}" hidden></pre></div>'
    )


def _incident_row(incident: dict[str, Any]) -> str:
    url = str(incident.get("url") or "")
    ident = esc(incident.get("id", ""))
    link = f'<a href="{esc(url)}">{ident}</a>' if url.startswith(("http://", "https://", "/")) else ident
    labels = incident.get("labels") or {}
    shown = ", ".join(f"{k}={v}" for k, v in labels.items()) if isinstance(labels, dict) else str(labels)
    return (
        f"<tr><td>{link}</td><td>{esc(incident.get('status', ''))}</td>"
        f"<td>{esc(incident.get('starts_at', ''))}</td><td>{esc(shown)}</td></tr>"
    )


def latest_incidents_html(incidents: list[dict[str, Any]]) -> str:
    if not incidents:
        return "<p>No recent incidents.</p>"
    head = "<tr><th>incident</th><th>status</th><th>started</th><th>labels</th></tr>"
    return f"<table>{head}{''.join(_incident_row(i) for i in incidents)}</table>"


def _head(runbook: Runbook, labels: dict[str, str]) -> list[str]:
    """Title, severity, the alert's labels and, for a GPU, its memory curve."""
    parts = [
        '<p><a href="../runbooks">All runbooks</a></p>',
        f"<h1>{esc(runbook.alert)}</h1>",
        f'<p><span class="severity-{esc(runbook.severity)}">{esc(runbook.severity)}</span>: '
        f"{esc(runbook.summary)}</p>",
    ]
    if labels:
        rows = "".join(f"<tr><th>{esc(k)}</th><td><code>{esc(v)}</code></td></tr>" for k, v in labels.items())
        parts.append(f"<h2>Alert labels</h2><table>{rows}</table>")
    else:
        parts.append("<p>No alert labels given: add them to the address (<code>?gpu=0&amp;...</code>).</p>")
    if "gpu" in labels:
        src = esc(f"{runbook.alert}/memory.svg?gpu={quote(labels['gpu'], safe='')}")
        parts.append(
            '<h2>Memory curve</h2><p><img id="memory-curve" alt="memory curve of the GPU (30 min)" '
            f'src="{src}" style="max-width:100%"></p>'
        )
    return parts


def runbook_html(
    runbook: Runbook, labels: dict[str, str], incidents: list[dict[str, Any]] | None, nonce: str
) -> str:
    parts = _head(runbook, labels)
    if incidents is not None:
        parts.append("<h2>Latest incidents</h2>" + latest_incidents_html(incidents))
    parts.append(
        '<p><label>Token for change steps: <input type="password" id="token" autocomplete="off" '
        'placeholder="bearer token"></label> (read steps need none)</p>'
    )
    for section in runbook.section_order():
        parts.append(f"<h2>{esc(section)}</h2>")
        parts.append(markdown(runbook.sections[section]))
        parts.extend(step_html(runbook.alert, s, labels) for s in runbook.steps if s.section == section)
    parts.extend(
        step_html(runbook.alert, s, labels) for s in runbook.steps if s.section not in runbook.sections
    )
    # JSON in a script element: `<`, `>` and `&` escaped so no value can close the element.
    data = json.dumps(labels).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    parts.append(f'<script type="application/json" id="labels">{data}</script>')
    parts.append(f'<script nonce="{nonce}">{RUNBOOK_SCRIPT}</script>')
    return "\n".join(parts)
