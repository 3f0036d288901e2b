"""The runbook service's app: the runbook pages, their step runs, and health; or those routes alone.

The routes live per resource (`runbook_routes`, `step_routes`, and `webhook` for Alertmanager and the
incidents); this module puts them together for the standalone service and for the exporter's own app.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp

from servescope.common.head import HeadAsGet
from servescope.runbooks.actions import RunContext
from servescope.runbooks.asgi import DEFAULT_BODY_LIMIT, WEBHOOK_BODY_LIMIT, BodyLimit
from servescope.runbooks.audit import DEFAULT_AUDIT_LOG, AuditLog
from servescope.runbooks.document import UnknownAlertError, runbooks_dir
from servescope.runbooks.runbook_routes import Incidents, Pages, add_page_routes
from servescope.runbooks.settings import TokenSettings
from servescope.runbooks.step_pool import StepPool
from servescope.runbooks.step_routes import add_step_routes
from servescope.runbooks.webhook import WEBHOOK_PATH

_RUN_PATH = re.compile(r"/runbooks/[^/]+/steps/[^/]+/run")
Readiness = Callable[[], str | None]  # why the service is not ready, None when it is


def runbook_router(pages: Pages) -> APIRouter:
    """The /runbooks routes over what `pages` holds: the folder, the run context, the token and audit log."""
    router = APIRouter()
    add_page_routes(router, pages)
    add_step_routes(router, pages)
    return router


def _health_routes(app: FastAPI, readiness: Readiness | None) -> None:
    # Async on purpose: answered on the event loop, never queued behind a thread pool.
    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/runbooks")

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "alive"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        # On a thread: the check may wait for the store's lock, and try a write.
        problem = await run_in_threadpool(readiness) if readiness is not None else None
        if problem is not None:
            return JSONResponse({"status": "not ready", "reason": problem}, status_code=503)
        return JSONResponse({"status": "ready"})


def body_limit(path: str) -> int | None:
    """The largest request body a route takes: the webhook's notifications, else a step run's JSON;
    None for the step-run route, which refuses a large body itself and audits the refusal."""
    if _RUN_PATH.fullmatch(path):
        return None
    return WEBHOOK_BODY_LIMIT if path == WEBHOOK_PATH else DEFAULT_BODY_LIMIT


def create_runbook_app(
    runbooks_dir: Path,
    ctx: RunContext,
    *,
    token: str | None,
    audit: AuditLog,
    incidents: Incidents | None = None,
    readiness: Readiness | None = None,
    pool: StepPool | None = None,
    trusted_proxies: tuple[str, ...] = (),
    api_docs: bool = False,
) -> FastAPI:
    """The standalone runbook server: the router, health, and `/` sending browsers to the index;
    /docs and /openapi.json only when `api_docs`."""
    app = FastAPI(
        title="servescope runbooks",
        docs_url="/docs" if api_docs else None,
        redoc_url=None,
        openapi_url="/openapi.json" if api_docs else None,
    )
    pages = Pages(runbooks_dir, lambda _: ctx, token, audit, incidents, pool or StepPool(), trusted_proxies)
    app.include_router(runbook_router(pages))
    _health_routes(app, readiness)
    return app


def wrapped(app: ASGIApp) -> ASGIApp:
    """The app as served: HEAD answered wherever GET is, bodies over their route's limit refused."""
    return HeadAsGet(BodyLimit(app, body_limit))


def self_context(request: Request) -> RunContext:
    """For the router mounted in the exporter: read actions ask this very server (its bound socket)."""
    server = request.scope.get("server")
    if not server or server[1] is None:
        return RunContext()
    host, port = server[0], server[1]
    shown = f"[{host}]" if ":" in host else host
    return RunContext(exporter_url=f"http://{shown}:{port}")


def mounted_router() -> APIRouter | None:
    """The router for the exporter's own app: the default runbooks folder (None when there is none), the
    token from SERVESCOPE_RUNBOOK_TOKEN (no token: change steps refused), the audit log in the working
    folder, read actions asking the exporter itself."""
    try:
        folder = runbooks_dir(None)
    except UnknownAlertError:
        return None
    token = (TokenSettings().token or "").strip() or None
    return runbook_router(Pages(folder, self_context, token, AuditLog(DEFAULT_AUDIT_LOG)))
