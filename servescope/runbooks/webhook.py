"""The Alertmanager webhook receiver and the incident routes.

    POST /alertmanager/webhook   an Alertmanager (0.25+) version "4" notification
    GET  /incidents              the incidents (JSON, streamed, or a page for a browser), newest first,
                                 at most 200 a page (?limit=, older ones with ?before=<id>)
    GET  /incidents/{id}         one incident with its read steps' results
    GET  /incidents/metrics      the webhook's own series

A notification is authenticated by a bearer token (the receiver's `credentials_file`) or basic auth,
bounded in size, and split into its alerts (see `incident_service`): a firing alert opens an incident and
its runbook's read steps run on a bounded pool; when the pool's queue is full the answer is 503 and
Alertmanager sends the group again later. Change steps never run from here. A resolved alert resolves
its incident. A notification the store cannot write is answered 503 (Alertmanager retries) and
readiness reports why until the store writes again.

Labels are untrusted: they are stored as data, shown escaped, and reach actions only through
`bind_step`, whose typed parameters refuse anything else (a refusal is the step's failed result).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import ValidationError

from servescope.core.config import AlertsConfig
from servescope.core.errors import ServescopeError
from servescope.runbooks.actions import RunContext
from servescope.runbooks.actions.trust import REGISTRY as TRUST_REGISTRY
from servescope.runbooks.asgi import BodyTimeoutError, BodyTooLargeError, read_body
from servescope.runbooks.auth import REALM, WebhookAuth
from servescope.runbooks.document import DEFAULT_CONFIG
from servescope.runbooks.incident_html import incident_html, incidents_html, wants_html
from servescope.runbooks.incident_service import IncidentService, QueueFullError, WebhookMetrics
from servescope.runbooks.incidents import MAX_ID, IncidentStore, StoreError
from servescope.runbooks.payload import AlertmanagerPayload, payload_error
from servescope.runbooks.refusals import REGISTRY as REFUSALS_REGISTRY
from servescope.runbooks.shell import not_found
from servescope.runbooks.step_pool import PoolBusyError, StepPool

WEBHOOK_PATH = "/alertmanager/webhook"


class RefusedError(ServescopeError):
    """A webhook request answered with an error: status, outcome (a metric label), message, headers."""

    def __init__(
        self, status: int, outcome: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message, reason=outcome)
        self.status, self.outcome, self.message, self.headers = status, outcome, message, headers


def _check_headers(request: Request, auth: WebhookAuth, max_body_bytes: int) -> None:
    if not auth.allows(request.headers.get("authorization")):
        raise RefusedError(401, "unauthorized", "unauthorized", {"WWW-Authenticate": REALM})
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        raise RefusedError(415, "unsupported_media_type", "Content-Type must be application/json")
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise RefusedError(422, "invalid", "invalid Content-Length")
        if int(declared) > max_body_bytes:
            raise RefusedError(413, "too_large", f"body over the limit of {max_body_bytes} bytes")


async def _payload(request: Request, max_body_bytes: int) -> AlertmanagerPayload:
    """The notification, read up to the limit whatever Content-Length said, and validated."""
    try:
        body = await read_body(request, max_body_bytes)
    except BodyTooLargeError:
        raise RefusedError(413, "too_large", f"body over the limit of {max_body_bytes} bytes") from None
    except BodyTimeoutError as exc:
        raise RefusedError(408, "timeout", str(exc)) from None
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise RefusedError(422, "invalid", f"invalid JSON: {exc}"[:300]) from None
    try:
        return AlertmanagerPayload.model_validate(document)
    except ValidationError as exc:
        raise RefusedError(422, "invalid", payload_error(exc)[:500]) from None


async def _handled(service: IncidentService, pool: StepPool, payload: AlertmanagerPayload) -> dict[str, int]:
    """The notification handled on the webhook's own threads; a refusal to answer 503 with."""
    retry = {"Retry-After": "10"}
    try:
        return await pool.run(service.handle, payload)
    except (QueueFullError, PoolBusyError) as exc:
        raise RefusedError(503, "queue_full", f"{exc}; retry later", retry) from None
    except StoreError as exc:
        raise RefusedError(503, "store_error", f"{exc}; retry later", retry) from None


def _add_webhook_route(
    router: APIRouter, service: IncidentService, auth: WebhookAuth, max_body_bytes: int
) -> None:
    metrics = service.metrics
    pool = StepPool(workers=2, waiting=16)  # handling is one notification at a time anyway

    @router.post(WEBHOOK_PATH)
    async def webhook(request: Request) -> Response:
        try:
            _check_headers(request, auth, max_body_bytes)
            payload = await _payload(request, max_body_bytes)
            summary = await _handled(service, pool, payload)
        except RefusedError as refused:
            metrics.requests.labels(refused.outcome).inc()
            return JSONResponse(
                {"error": refused.message}, status_code=refused.status, headers=refused.headers
            )
        metrics.requests.labels("ok").inc()
        return JSONResponse(summary)


def _add_incident_routes(router: APIRouter, service: IncidentService) -> None:
    store = service.store

    @router.get("/incidents/metrics")
    def incident_metrics() -> Response:
        text = service.metrics.text() + generate_latest(TRUST_REGISTRY) + generate_latest(REFUSALS_REGISTRY)
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    @router.get("/incidents", response_model=None)
    def list_incidents(
        request: Request,
        limit: int = Query(50, ge=1, le=MAX_PAGE),
        status: Literal["firing", "resolved"] | None = None,
        before: int | None = Query(None, ge=1, le=MAX_ID),
    ) -> Response:
        if wants_html(request):
            return incidents_html(store.list(limit, status, before))
        return StreamingResponse(_streamed(store, limit, status, before), media_type="application/json")

    @router.get("/incidents/{incident_id}", response_model=None)
    def show_incident(request: Request, incident_id: str) -> Response:
        number = int(incident_id) if incident_id.isdigit() and len(incident_id) <= 19 else -1
        found = store.get(number) if 0 <= number <= MAX_ID else None
        if found is None:
            message = f"no incident {incident_id[:40]}"
            if wants_html(request):
                return not_found(message)
            return JSONResponse({"error": message}, status_code=404)
        return incident_html(found) if wants_html(request) else JSONResponse(found)


MAX_PAGE = 200  # incidents per /incidents page; older ones with ?before=<the last id>
_BATCH = 25


def _streamed(store: IncidentStore, limit: int, status: str | None, before: int | None) -> Iterator[bytes]:
    """The page as a JSON array, read from the store a few incidents at a time: a reader holds one
    batch in memory, not the page, and never the store's lock while it is sent."""
    yield b"["
    sent = 0
    while sent < limit:
        rows = store.list(min(_BATCH, limit - sent), status, before)
        for row in rows:
            yield (b"," if sent else b"") + json.dumps(row, ensure_ascii=False).encode()
            sent += 1
        if len(rows) < _BATCH:
            break
        before = int(rows[-1]["id"])
    yield b"]"


class IncidentRouter(APIRouter):
    """The webhook and incident routes; `service` holds the store, the pool and the metrics."""

    service: IncidentService


def incident_router(
    store: IncidentStore,
    runbooks_dir: Path | None,
    ctx_factory: Callable[[], RunContext],
    *,
    auth: WebhookAuth,
    max_body_bytes: int = 1_048_576,
    workers: int = 4,
    queue_size: int = 64,
    registry: CollectorRegistry | None = None,
    config: AlertsConfig = DEFAULT_CONFIG,
) -> IncidentRouter:
    """The routes: POST /alertmanager/webhook, GET /incidents, /incidents/{id}, /incidents/metrics."""
    metrics = WebhookMetrics(registry)
    service = IncidentService(
        store,
        runbooks_dir,
        ctx_factory,
        workers=workers,
        queue_size=queue_size,
        metrics=metrics,
        config=config,
    )
    router = IncidentRouter()
    router.service = service
    _add_webhook_route(router, service, auth, max_body_bytes)
    _add_incident_routes(router, service)
    return router


__all__ = ["WEBHOOK_PATH", "IncidentRouter", "WebhookAuth", "incident_router"]
