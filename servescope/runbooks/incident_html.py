"""The incident pages for people: the list of incidents, and one with its labels and step results.

The same routes answer JSON to programs; a browser (Accept: text/html) gets these pages.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from servescope.common.html import esc
from servescope.runbooks.shell import page


def _labels_html(labels: Mapping[str, Any]) -> str:
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in sorted(labels.items()))
    return f"<table>{rows}</table>"


def incidents_html(incidents: list[dict[str, Any]]) -> HTMLResponse:
    rows = "".join(
        f"<tr><td><a href='{esc(i['url'])}'>{esc(i['id'])}</a></td><td>{esc(i['alertname'])}</td>"
        f"<td>{esc(i['status'])}</td><td>{esc(i['starts_at'])}</td><td>{esc(i['ends_at'] or '')}</td>"
        f"<td>{esc(i['note'] or '')}</td></tr>"
        for i in incidents
    )
    head = "<tr><th>id</th><th>alert</th><th>status</th><th>started</th><th>ended</th><th>note</th></tr>"
    return page("Incidents", f"<h1>Incidents</h1><table>{head}{rows}</table>")


def incident_html(incident: dict[str, Any]) -> HTMLResponse:
    parts = [
        f"<h1>Incident {esc(incident['id'])}: {esc(incident['alertname'])}</h1>",
        f"<p>Status: <b>{esc(incident['status'])}</b>; started {esc(incident['starts_at'])}",
        f"; ended {esc(incident['ends_at'])}</p>" if incident["ends_at"] else "</p>",
        f"<p>{esc(incident['note'])}</p>" if incident["note"] else "",
        "<h2>Labels</h2>",
        _labels_html(incident["labels"]),
        "<h2>Annotations</h2>",
        _labels_html(incident["annotations"]),
        "<h2>Read steps</h2>",
    ]
    if not incident["steps"]:
        parts.append("<p>No step results yet.</p>")
    for step in incident["steps"]:
        css = "ok" if step["ok"] else "failed"
        parts.append(
            f"<h3 class='{css}'>{esc(step['step_id'])}: {esc(step['title'] or '')} "
            f"({'ok' if step['ok'] else 'failed'})</h3>"
            f"<pre>{esc(step['output'])}</pre>"
            f"<details><summary>data</summary><pre>{esc(json.dumps(step['data'], indent=2))}</pre></details>"
        )
    return page(f"Incident {incident['id']}", "".join(parts))


def wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "").lower()
