"""The HTTP face of the exporter: /metrics from ready bytes, health and readiness, a small index."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from servescope import __version__
from servescope.core.head import HeadAsGet
from servescope.core.html import page, render
from servescope.exporter.dcgm_api import dcgm_router
from servescope.exporter.exposition import CONTENT_TYPE
from servescope.exporter.memory_api import MemoryApi
from servescope.exporter.nvlink_api import nvlink_router
from servescope.exporter.runtime import Runtime


def create_app(
    runtime: Runtime,
    *,
    manage_runtime: bool = True,
    routers: Sequence[APIRouter] = (),
    api_docs: bool = False,
) -> FastAPI:
    """Build the app around a runtime; with `manage_runtime` the app starts and stops its sources.

    `routers` are served beside the exporter's own routes;
    `api_docs` serves /openapi.json, /docs and /redoc.
    """

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if manage_runtime:
            runtime.start()
        try:
            yield
        finally:
            if manage_runtime:
                runtime.stop()

    app = FastAPI(
        title="servescope",
        version=__version__,
        lifespan=lifespan,
        openapi_url="/openapi.json" if api_docs else None,
        docs_url="/docs" if api_docs else None,
        redoc_url="/redoc" if api_docs else None,
    )
    app.add_middleware(HeadAsGet)
    app.state.runtime = runtime
    _add_gpu_api(app, runtime)
    for router in routers:
        app.include_router(router)
    _add_own_routes(app, runtime)
    return app


def sources_report(runtime: Runtime) -> dict[str, dict[str, Any]]:
    """Each source's readiness, errors and last error, and what the source adds of its own (the vLLM
    source: what discovery found and what it could not reach, with why)."""
    _, report = runtime.readiness()
    for runner in runtime.runners:
        entry = report[runner.health.name]
        entry["errors"] = dict(runner.health.errors)
        entry["last_error"] = runner.health.last_error
        entry.update(runner.health.report or {})
    return report


def _add_gpu_api(app: FastAPI, runtime: Runtime) -> None:
    """The read-only GPU API: memory curves (with the derived source), NVLink links, DCGM fields."""
    if runtime.derived is not None:
        app.include_router(MemoryApi(runtime.history, runtime.derived, runtime.api_rejections).router())
    app.include_router(nvlink_router(runtime.nvlinks))
    app.include_router(dcgm_router(runtime.publisher))


def _add_own_routes(app: FastAPI, runtime: Runtime) -> None:
    """/metrics, the probes, the sources' report and the index page."""

    @app.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        # The bytes were rendered when a source last finished; nothing is collected here.
        exposition = runtime.publisher.current
        if "gzip" in request.headers.get("accept-encoding", ""):
            return Response(
                exposition.gzipped,
                media_type=CONTENT_TYPE,
                headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"},
            )
        return Response(exposition.body, media_type=CONTENT_TYPE)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "alive"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        ready, sources = runtime.readiness()
        failing = {name: entry["detail"] for name, entry in sources.items() if not entry["ready"]}
        body = {"ready": ready, "failing": failing, "sources": sources}
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/api/v1/sources")
    async def sources() -> dict[str, object]:
        return {"sources": sources_report(runtime)}

    @app.get("/", include_in_schema=False)
    async def index() -> HTMLResponse:
        mode = "SIMULATED fleet: not real data." if runtime.simulated else "Real NVML."
        return page("servescope", render("servescope.exporter", "index.html", version=__version__, mode=mode))
