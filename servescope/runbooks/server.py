"""The runbook service's app: the runbook pages, their step runs, and health; or those routes alone.

The routes live per resource (`runbook_routes`, `step_routes`, and `webhook` for Alertmanager and the
incidents); this module puts them together for the standalone service and for the exporter's own app.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import RedirectResponse

from servescope.runbooks.actions import RunContext
from servescope.runbooks.audit import DEFAULT_AUDIT_LOG, AuditLog
from servescope.runbooks.document import UnknownAlertError, runbooks_dir
from servescope.runbooks.runbook_routes import ContextFactory, Incidents, Pages, add_page_routes
from servescope.runbooks.settings import TokenSettings
from servescope.runbooks.step_routes import add_step_routes


def runbook_router(
    runbooks_dir: Path,
    ctx_factory: ContextFactory,
    *,
    token: str | None,
    audit: AuditLog,
    incidents: Incidents | None = None,
) -> APIRouter:
    """The /runbooks routes over a folder of runbooks; `ctx_factory(request)` gives the RunContext."""
    pages = Pages(runbooks_dir, ctx_factory, token, audit, incidents)
    router = APIRouter()
    add_page_routes(router, pages)
    add_step_routes(router, pages)
    return router


def _health_routes(app: FastAPI) -> None:
    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/runbooks")

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "alive"}


def create_runbook_app(
    runbooks_dir: Path,
    ctx: RunContext,
    *,
    token: str | None,
    audit: AuditLog,
    incidents: Incidents | None = None,
) -> FastAPI:
    """The standalone runbook server: the router, and `/` sending browsers to the index."""
    app = FastAPI(title="servescope runbooks", docs_url=None, redoc_url=None)
    app.include_router(
        runbook_router(runbooks_dir, lambda _: ctx, token=token, audit=audit, incidents=incidents)
    )
    _health_routes(app)
    return app


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
    return runbook_router(folder, self_context, token=token, audit=AuditLog(DEFAULT_AUDIT_LOG))
