"""The incident pages for people: the list of incidents, and one with its labels and step results
(templates/incidents.html, incident.html).

The same routes answer JSON to programs; a browser (Accept: text/html) gets these pages.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from servescope.runbooks.shell import body, page


def incidents_html(incidents: list[dict[str, Any]]) -> HTMLResponse:
    return page("Incidents", body("incidents.html", incidents=incidents))


def incident_html(incident: dict[str, Any]) -> HTMLResponse:
    return page(f"Incident {incident['id']}", body("incident.html", incident=incident))


def wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "").lower()
