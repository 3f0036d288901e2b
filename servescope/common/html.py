"""The one HTML page shell of servescope (the exporter's index, the runbook service's pages).

Pages are built from escaped text (`esc`); a page runs a script only with the per-response nonce it was
given, and every page is sent with a Content-Security-Policy that allows nothing else.
"""

from __future__ import annotations

import html
from typing import Any

from fastapi.responses import HTMLResponse


def esc(value: Any) -> str:
    """Any value as escaped HTML text (quotes too, so it may stand in an attribute)."""
    return html.escape(str(value), quote=True)


def page(
    title: str, body: str, *, style: str = "", nonce: str | None = None, status: int = 200
) -> HTMLResponse:
    """The page: `body` inside the shell, with `style` (when given) as its stylesheet; scripts run only
    with `nonce`, when one is given."""
    script_src = f"'nonce-{nonce}'" if nonce else "'none'"
    headers = {
        "Content-Security-Policy": (
            f"default-src 'self'; script-src {script_src}; style-src 'unsafe-inline'; img-src 'self'; "
            "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
        ),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
    stylesheet = f"<style>{style}</style>" if style else ""
    document = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title>{stylesheet}</head><body>{body}</body></html>"
    )
    return HTMLResponse(document, status_code=status, headers=headers)
