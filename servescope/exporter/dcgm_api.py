"""GET /api/v1/gpus/{gpu}/dcgm: the DCGM series of one GPU as the exporter last published them.

Read-only: nothing is collected here (the DCGM source keeps sampling on its own clock); the answer is
the GPU's `servescope_dcgm_*` samples from the exposition `/metrics` serves now, with the time it was
rendered. The runbook service's `dcgm_sample` step asks the exporter of the alert's own node for them
a few times, a second apart, instead of running `dcgmi` in its own pod.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from servescope.core.exposition import parse_exposition
from servescope.exporter.publisher import Publisher

DCGM_ROUTE = "/api/v1/gpus/{gpu}/dcgm"
PREFIX = "servescope_dcgm_"


def dcgm_body(publisher: Publisher, gpu: str) -> dict[str, Any] | None:
    """The GPU's (index or UUID, any case) DCGM samples; None when the exposition has none of it."""
    exposition = publisher.current
    families = parse_exposition(
        exposition.body.decode("utf-8", "replace"), keep=lambda n: n.startswith(PREFIX)
    )
    wanted = gpu.lower()
    series: list[dict[str, Any]] = []
    found: dict[str, str] = {}
    for family in families:
        for sample in family.samples:
            labels = sample.labels
            if labels.get("gpu") != gpu and labels.get("uuid", "").lower() != wanted:
                continue
            found = found or {k: labels.get(k, "") for k in ("gpu", "uuid", "hostname")}
            series.append({"name": sample.name, "labels": dict(labels), "value": sample.value})
    if not series:
        return None
    return {**found, "rendered_at": exposition.rendered_at, "series": series}


def dcgm_router(publisher: Publisher) -> APIRouter:
    router = APIRouter()

    @router.get(DCGM_ROUTE)
    def dcgm(gpu: str) -> JSONResponse:
        body = dcgm_body(publisher, gpu)
        if body is None:
            message = f"GPU {gpu[:80]!r}: no DCGM series (is the DCGM source running on this node?)"
            return JSONResponse({"error": message}, status_code=404)
        return JSONResponse(body)

    return router
