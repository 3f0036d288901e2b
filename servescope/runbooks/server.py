"""The runbook service's app: the runbook pages, their step runs, and health.

The routes live per resource (`runbook_routes`, `step_routes`, and `webhook` for Alertmanager and the
incidents); this module puts them together. The runbook service alone serves them: the node exporter
serves metrics and its read-only API only.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp

from servescope.core.config import AlertsConfig
from servescope.core.head import HeadAsGet
from servescope.runbooks.actions import RunContext
from servescope.runbooks.asgi import DEFAULT_BODY_LIMIT, WEBHOOK_BODY_LIMIT, BodyLimit, CredentialsGate
from servescope.runbooks.audit import AuditLog
from servescope.runbooks.auth import REALM, ChangeTokens, Networks, WebhookAuth
from servescope.runbooks.document import DEFAULT_CONFIG
from servescope.runbooks.runbook_routes import Incidents, Pages, add_page_routes
from servescope.runbooks.step_pool import StepPool
from servescope.runbooks.step_routes import add_step_routes
from servescope.runbooks.webhook import WEBHOOK_PATH

_RUN_PATH = re.compile(r"/runbooks/[^/]+/steps/[^/]+/run")
Readiness = Callable[[], str | None]  # why the service is not ready, None when it is


def runbook_router(pages: Pages) -> APIRouter:
    """The /runbooks routes over what `pages` holds: the folder, the run context, the tokens and audit log."""
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
    tokens: ChangeTokens | None,
    audit: AuditLog,
    incidents: Incidents | None = None,
    readiness: Readiness | None = None,
    pool: StepPool | None = None,
    trusted_proxies: Networks = (),
    api_docs: bool = False,
    on_stop: Callable[[], object] | None = None,
    config: AlertsConfig = DEFAULT_CONFIG,
) -> FastAPI:
    """The standalone runbook server: the router, health, and `/` sending browsers to the index;
    /docs and /openapi.json only when `api_docs`; `on_stop` runs (on a thread) when the server stops."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if on_stop is not None:  # before the server returns: uvicorn re-raises the signal after that
            await run_in_threadpool(on_stop)

    app = FastAPI(
        lifespan=lifespan,
        title="servescope runbooks",
        docs_url="/docs" if api_docs else None,
        redoc_url=None,
        openapi_url="/openapi.json" if api_docs else None,
    )
    pages = Pages(
        runbooks_dir, lambda _: ctx, tokens, audit, incidents, pool or StepPool(), trusted_proxies, config
    )
    app.include_router(runbook_router(pages))
    _health_routes(app, readiness)
    return app


def wrapped(
    app: ASGIApp, auth: WebhookAuth | None = None, refused: Callable[[], None] = lambda: None
) -> ASGIApp:
    """The app as served: HEAD answered wherever GET is, bodies over their route's limit refused, and
    with `auth`, a webhook post without its credentials refused (`refused` counts it) before either."""
    limited = BodyLimit(app, body_limit)
    if auth is None:
        return HeadAsGet(limited)
    return HeadAsGet(CredentialsGate(limited, WEBHOOK_PATH, auth.allows, REALM, refused))
