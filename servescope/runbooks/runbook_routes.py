"""The runbook pages: the index, one page per alert, and the GPU's memory curve it shows.

    GET  /runbooks                              index: alert, severity, summary
    GET  /runbooks/{alert}?<label>=<value>...   the runbook, its steps bound to the alert's labels
    GET  /runbooks/{alert}/memory.svg?gpu=...   the GPU's memory curve (memory_curve action, proxied)

Query parameters are untrusted: everything shown is escaped, and values reach an action only through
its typed parameters.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError

from servescope.core.config import AlertsConfig
from servescope.core.errors import first_reason
from servescope.runbooks.actions import ACTIONS, RunContext
from servescope.runbooks.audit import AuditLog
from servescope.runbooks.auth import ChangeTokens, Networks
from servescope.runbooks.document import DEFAULT_CONFIG, is_label_name, load_runbook, load_runbooks
from servescope.runbooks.model import Runbook, RunbookError, UnknownAlertError
from servescope.runbooks.runbook_html import index_html, runbook_html
from servescope.runbooks.shell import broken, not_found, page
from servescope.runbooks.step_pool import PoolBusyError, StepPool

Incidents = Callable[[str], list[dict[str, Any]]]
ContextFactory = Callable[[Request], RunContext]
_MAX_LABELS = 64
# Served from this origin: an SVG opened directly may not run scripts.
_SVG_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class Pages:
    """What the /runbooks routes serve from: the folder, the run context, the tokens and audit log, the
    pool step runs take their threads from, and the proxies whose X-Forwarded-For names the caller."""

    folder: Path
    ctx_factory: ContextFactory
    tokens: ChangeTokens | None
    audit: AuditLog
    incidents: Incidents | None = None
    pool: StepPool = field(default_factory=StepPool)
    trusted_proxies: Networks = ()
    config: AlertsConfig = DEFAULT_CONFIG  # the thresholds the pages show (--alerts-config)

    def load(self, alert: str) -> Runbook:
        return load_runbook(self.folder, alert, self.config)

    def latest_incidents(self, alert: str) -> list[dict[str, Any]] | None:
        if self.incidents is None:
            return None
        try:
            return self.incidents(alert)
        except Exception:
            return []  # the page stands without them


def _labels_from_query(request: Request) -> dict[str, str]:
    labels: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if is_label_name(name) and len(labels) < _MAX_LABELS:
            labels[name] = value
    return labels


def _text(message: str, status: int) -> Response:
    return Response(message, status_code=status, media_type="text/plain")


def add_page_routes(router: APIRouter, pages: Pages) -> None:
    @router.get("/runbooks", include_in_schema=False)
    def index() -> HTMLResponse:
        return page("servescope runbooks", index_html(*load_runbooks(pages.folder, pages.config)))

    @router.get("/runbooks/{alert}", include_in_schema=False)
    def runbook_page(alert: str, request: Request) -> HTMLResponse:
        try:
            runbook = pages.load(alert)
        except UnknownAlertError:
            return not_found(f"No runbook for alert {alert[:80]!r}.")
        except RunbookError as exc:
            return broken(exc)
        labels = _labels_from_query(request)
        latest = pages.latest_incidents(runbook.alert)
        nonce = secrets.token_urlsafe(16)
        return page(f"{runbook.alert} runbook", runbook_html(runbook, labels, latest, nonce), nonce=nonce)

    @router.get("/runbooks/{alert}/memory.svg", include_in_schema=False)
    async def memory_svg(alert: str, request: Request, gpu: str = "", window: str = "30m") -> Response:
        # A read of the exporter: on the step pool, never the quick routes' threads.
        ctx = pages.ctx_factory(request).model_copy(update={"execute": False})
        try:
            return await pages.pool.run(_memory_svg, pages, alert, ctx, gpu, window)
        except PoolBusyError as exc:
            return _text(str(exc), 503)


def _memory_svg(pages: Pages, alert: str, ctx: RunContext, gpu: str, window: str) -> Response:
    """The GPU's memory curve as SVG, or a text answer saying why there is none."""
    try:
        pages.load(alert)
    except (UnknownAlertError, RunbookError):
        return _text(f"no runbook for alert {alert[:80]!r}", 404)
    action = ACTIONS["memory_curve"]
    try:
        params = action.params.model_validate({"gpu": gpu, "window": window})
    except ValidationError as exc:
        return _text(f"invalid gpu or window: {first_reason(exc)}", 422)
    result = action.run(params, ctx)
    if not result.ok or result.svg is None:
        return _text(result.output, 502)
    return Response(result.svg, media_type="image/svg+xml", headers=_SVG_HEADERS)
