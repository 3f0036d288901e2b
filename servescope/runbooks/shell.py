"""What the runbook service's pages add to the common shell (core/html.py): their style
(templates/runbook.css), and the runbook page's script (templates/runbook.js), the only one, allowed by a
per-response nonce."""

from __future__ import annotations

from typing import Any

from fastapi.responses import HTMLResponse

from servescope.core.html import Markup, render
from servescope.core.html import page as html_page

TEMPLATES = "servescope.runbooks"


def body(template: str, **values: Any) -> Markup:
    """A page body from the runbook service's templates."""
    return render(TEMPLATES, template, **values)


def page(title: str, content: Markup, *, nonce: str | None = None, status: int = 200) -> HTMLResponse:
    """A runbook-service page: `content` in the common shell, with the service's style."""
    return html_page(title, content, style=body("runbook.css"), nonce=nonce, status=status)


def not_found(message: str) -> HTMLResponse:
    return page("Not found", body("not_found.html", message=message), status=404)


def broken(error: object) -> HTMLResponse:
    """The page of a runbook that cannot be parsed: the parser's message, as text."""
    return page("Broken runbook", body("broken.html", error=error), status=500)
