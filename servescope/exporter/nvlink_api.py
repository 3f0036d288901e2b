"""GET /api/v1/gpus/{gpu}/nvlink: each link's state and error counters, which the exposition sums per GPU."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from servescope.exporter.stores.nvlink import NvlinkLinks

NVLINK_ROUTE = "/api/v1/gpus/{gpu}/nvlink"


def nvlink_body(store: NvlinkLinks, gpu: str) -> dict[str, Any] | None:
    """The links of the GPU (index or UUID) as of the last NVML cycle; None when it has none known."""
    found = store.find(gpu)
    if found is None:
        return None
    (index, uuid, hostname), links = found
    return {
        "gpu": index,
        "uuid": uuid,
        "hostname": hostname,
        "links": [{"link": s.link, "up": s.up, "errors": s.errors} for s in links],
    }


def nvlink_router(store: NvlinkLinks) -> APIRouter:
    router = APIRouter()

    @router.get(NVLINK_ROUTE)
    async def nvlink(gpu: str) -> JSONResponse:
        body = nvlink_body(store, gpu)
        if body is None:
            known = ", ".join(store.known()) or "none"
            message = f"GPU {gpu[:80]!r}: no NVLink links known (GPUs with NVLink: {known})"
            return JSONResponse({"error": message}, status_code=404)
        return JSONResponse(body)

    return router
