"""The Alertmanager webhook receiver: alerts become incidents, and their runbooks' read steps run.

`POST /alertmanager/webhook` takes an Alertmanager (0.25+) version "4" notification, authenticated by a
bearer token (the receiver's `credentials_file`) or basic auth. A group is split into its alerts; a key
(fingerprint, status, startsAt) already handled is a duplicate (the keys are kept in the store, so a
re-send after a restart is one too). A firing alert opens an incident (one per fingerprint and startsAt)
and its runbook's read steps run on a bounded pool; when the pool's queue is full the answer is 503 and
Alertmanager sends the group again later. Change steps never run from here. A resolved alert resolves
its incident.

Labels are untrusted: they are stored as data, shown escaped, and reach actions only through
`bind_step`, whose typed parameters refuse anything else (a refusal is the step's failed result).
"""

from __future__ import annotations

import hmac
import html
import json
import logging
import os
import threading
from base64 import b64decode
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from servescope.runbooks.actions import RunContext
from servescope.runbooks.document import RunbookError, UnknownAlertError, load_runbook, runbooks_dir
from servescope.runbooks.incidents import IncidentStore
from servescope.runbooks.runner import bind_step, run_bound

log = logging.getLogger(__name__)

ENV_TOKEN = "SERVESCOPE_WEBHOOK_TOKEN"
WEBHOOK_PATH = "/alertmanager/webhook"
_REALM = 'Bearer realm="servescope", Basic realm="servescope"'


# --- authentication ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class WebhookAuth:
    """Who may post alerts: a bearer token, a basic-auth user and password, or both. Neither: nobody."""

    token: str | None = None
    username: str | None = None
    password: str | None = None

    @classmethod
    def from_token_file(cls, path: Path | str) -> WebhookAuth:
        token = Path(path).read_text(encoding="utf-8").strip()
        if not token:
            raise ValueError(f"{path}: the webhook token file is empty")
        return cls(token=token)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WebhookAuth:
        """The token in SERVESCOPE_WEBHOOK_TOKEN (empty or unset: nobody is let in)."""
        token = (os.environ if environ is None else environ).get(ENV_TOKEN, "").strip()
        return cls(token=token or None)

    def allows(self, authorization: str | None) -> bool:
        if not authorization:
            return False
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and self.token:
            return hmac.compare_digest(value.encode(), self.token.encode())
        if scheme.lower() == "basic" and self.username is not None and self.password is not None:
            try:
                user, sep, password = b64decode(value, validate=True).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError):
                return False
            user_ok = hmac.compare_digest(user.encode(), self.username.encode())
            password_ok = hmac.compare_digest(password.encode(), self.password.encode())
            return bool(sep) and user_ok and password_ok
        return False


# --- the payload ------------------------------------------------------------------------------------
class AlertmanagerAlert(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: str = Field(min_length=1, max_length=64)  # noqa: N815 (Alertmanager's names)
    endsAt: str = Field("", max_length=64)  # noqa: N815
    generatorURL: str = ""  # noqa: N815
    fingerprint: str = Field(min_length=1, max_length=128)


class AlertmanagerPayload(BaseModel):
    """An Alertmanager webhook notification, version "4"; fields we do not use are ignored."""

    model_config = ConfigDict(extra="ignore")

    version: Literal["4"]
    groupKey: str = ""  # noqa: N815
    truncatedAlerts: int = 0  # noqa: N815
    status: Literal["firing", "resolved"] | None = None
    receiver: str = ""
    groupLabels: dict[str, str] = Field(default_factory=dict)  # noqa: N815
    commonLabels: dict[str, str] = Field(default_factory=dict)  # noqa: N815
    commonAnnotations: dict[str, str] = Field(default_factory=dict)  # noqa: N815
    externalURL: str = ""  # noqa: N815
    alerts: list[AlertmanagerAlert]


def _validation_message(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"]) or "body"
    return f"invalid Alertmanager payload: {where}: {error['msg']}"


# --- metrics ----------------------------------------------------------------------------------------
class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.requests = Counter(
            "servescope_webhook_requests",
            "Alertmanager webhook requests, by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.dedup_hits = Counter(
            "servescope_webhook_dedup_hits",
            "Alerts already handled (same fingerprint, status and startsAt), ignored.",
            registry=self.registry,
        )
        self.step_runs = Counter(
            "servescope_runbook_step_runs",
            "Runbook read steps run for incidents, by outcome (ok, failed, invalid, error).",
            ["outcome"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "servescope_webhook_queue_depth",
            "Incidents whose read steps are queued or running.",
            registry=self.registry,
        )

    def text(self) -> bytes:
        return generate_latest(self.registry)


# --- the service ------------------------------------------------------------------------------------
class QueueFullError(RuntimeError):
    pass


class IncidentService:
    """The store, the runbooks, the worker pool and the metrics behind the router."""

    def __init__(
        self,
        store: IncidentStore,
        runbooks: Path | None,
        ctx_factory: Callable[[], RunContext],
        *,
        workers: int = 4,
        queue_size: int = 64,
        metrics: WebhookMetrics | None = None,
    ) -> None:
        if workers < 1 or queue_size < 0:
            raise ValueError("workers must be at least 1 and queue_size at least 0")
        self.store = store
        self.runbooks = runbooks
        self.ctx_factory = ctx_factory
        self.metrics = metrics if metrics is not None else WebhookMetrics()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="runbook-step")
        self._slots = threading.BoundedSemaphore(workers + queue_size)
        self._handling = threading.Lock()  # one notification at a time: check, act, remember

    def close(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait)

    def _folder(self) -> Path:
        return runbooks_dir(self.runbooks)

    def handle(self, payload: AlertmanagerPayload) -> dict[str, int]:
        """Each alert in turn; QueueFullError when a firing alert's steps cannot be queued (the alerts
        before it are handled and remembered, so Alertmanager's re-send carries on from that one)."""
        summary = {"received": len(payload.alerts), "new": 0, "duplicates": 0, "queued": 0}
        with self._handling:
            for alert in payload.alerts:
                key = (alert.fingerprint, alert.status, alert.startsAt)
                if self.store.seen(*key):
                    summary["duplicates"] += 1
                    self.metrics.dedup_hits.inc()
                    continue
                record = alert.model_dump()
                if alert.status == "resolved":
                    self.store.mark_resolved(record)
                else:
                    summary["queued"] += self._fire(record, alert.labels)
                self.store.remember(*key)
                summary["new"] += 1
        return summary

    def _fire(self, record: dict[str, Any], labels: dict[str, str]) -> int:
        alertname = labels.get("alertname", "")
        try:
            runbook = load_runbook(self._folder(), alertname)
        except UnknownAlertError as exc:
            self.store.record_firing(record, note=f"no runbook: {exc}")
            return 0
        except RunbookError as exc:
            self.store.record_firing(record, note=f"the runbook cannot be used: {exc}")
            return 0
        incident_id, _ = self.store.record_firing(record)
        if not self._slots.acquire(blocking=False):
            self.store.set_note(incident_id, "read steps not queued yet: the worker queue was full")
            raise QueueFullError("the runbook worker queue is full")
        self.store.set_note(incident_id, f"read steps of runbook {runbook.alert} queued")
        self.metrics.queue_depth.inc()
        steps = list(runbook.read_steps)
        try:
            self._pool.submit(self._run_steps, incident_id, steps, dict(labels))
        except RuntimeError:  # the pool is shut down
            self._done()
            raise QueueFullError("the runbook worker pool is shut down") from None
        return 1

    def _done(self) -> None:
        self.metrics.queue_depth.dec()
        self._slots.release()

    def _run_steps(self, incident_id: int, steps: list[Any], labels: dict[str, str]) -> None:
        try:
            ctx = self.ctx_factory().for_labels(labels).model_copy(update={"execute": False})
            for step in steps:
                self._run_step(incident_id, step, labels, ctx)
            self.store.set_note(incident_id, f"{len(steps)} read step(s) run")
        except Exception:
            log.exception("incident %s: running the read steps failed", incident_id)
        finally:
            self._done()

    def _run_step(self, incident_id: int, step: Any, labels: dict[str, str], ctx: RunContext) -> None:
        try:
            bound = bind_step(step, labels)
        except Exception as exc:
            self.metrics.step_runs.labels("invalid").inc()
            self.store.add_step_result(
                incident_id,
                step.id,
                False,
                str(exc),
                {"error": "parameters"},
                title=step.title,
                action=step.action,
            )
            return
        try:
            result = run_bound(bound, ctx)
        except Exception as exc:
            self.metrics.step_runs.labels("error").inc()
            self.store.add_step_result(
                incident_id,
                step.id,
                False,
                f"{type(exc).__name__}: {exc}",
                {"error": "exception"},
                title=step.title,
                action=step.action,
            )
            return
        self.metrics.step_runs.labels("ok" if result.ok else "failed").inc()
        data = {**result.data, "params": result.params, "command": result.command}
        self.store.add_step_result(
            incident_id, step.id, result.ok, result.output, data, title=step.title, action=step.action
        )


# --- HTML -------------------------------------------------------------------------------------------
def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}pre{background:#f4f4f4;padding:.5em;"
        "white-space:pre-wrap;word-break:break-all}td,th{padding:.2em .6em;text-align:left;"
        "vertical-align:top}.ok{color:#070}.failed{color:#a00}</style></head>"
        f"<body>{body}</body></html>"
    )


def _labels_html(labels: Mapping[str, Any]) -> str:
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in sorted(labels.items()))
    return f"<table>{rows}</table>"


def incidents_html(incidents: list[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td><a href='{_e(i['url'])}'>{_e(i['id'])}</a></td><td>{_e(i['alertname'])}</td>"
        f"<td>{_e(i['status'])}</td><td>{_e(i['starts_at'])}</td><td>{_e(i['ends_at'] or '')}</td>"
        f"<td>{_e(i['note'] or '')}</td></tr>"
        for i in incidents
    )
    head = "<tr><th>id</th><th>alert</th><th>status</th><th>started</th><th>ended</th><th>note</th></tr>"
    return _page("Incidents", f"<h1>Incidents</h1><table>{head}{rows}</table>")


def incident_html(incident: dict[str, Any]) -> str:
    parts = [
        f"<h1>Incident {_e(incident['id'])}: {_e(incident['alertname'])}</h1>",
        f"<p>Status: <b>{_e(incident['status'])}</b>; started {_e(incident['starts_at'])}",
        f"; ended {_e(incident['ends_at'])}</p>" if incident["ends_at"] else "</p>",
        f"<p>{_e(incident['note'])}</p>" if incident["note"] else "",
        "<h2>Labels</h2>",
        _labels_html(incident["labels"]),
        "<h2>Annotations</h2>",
        _labels_html(incident["annotations"]),
        "<h2>Read steps</h2>",
    ]
    if not incident["steps"]:
        parts.append("<p>No step results yet.</p>")
    for step in incident["steps"]:
        css = "ok" if step["ok"] else "failed"
        parts.append(
            f"<h3 class='{css}'>{_e(step['step_id'])}: {_e(step['title'] or '')} "
            f"({'ok' if step['ok'] else 'failed'})</h3>"
            f"<pre>{_e(step['output'])}</pre>"
            f"<details><summary>data</summary><pre>{_e(json.dumps(step['data'], indent=2))}</pre></details>"
        )
    return _page(f"Incident {incident['id']}", "".join(parts))


def _wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "").lower()


# --- the router -------------------------------------------------------------------------------------
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
) -> IncidentRouter:
    """The routes: POST /alertmanager/webhook, GET /incidents, /incidents/{id}, /incidents/metrics."""
    metrics = WebhookMetrics(registry)
    service = IncidentService(
        store, runbooks_dir, ctx_factory, workers=workers, queue_size=queue_size, metrics=metrics
    )
    router = IncidentRouter()
    router.service = service

    def refuse(status: int, outcome: str, message: str, headers: dict[str, str] | None = None) -> Response:
        metrics.requests.labels(outcome).inc()
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    @router.post(WEBHOOK_PATH)
    async def webhook(request: Request) -> Response:
        if not auth.allows(request.headers.get("authorization")):
            return refuse(401, "unauthorized", "unauthorized", {"WWW-Authenticate": _REALM})
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
            return refuse(415, "unsupported_media_type", "Content-Type must be application/json")
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                return refuse(422, "invalid", "invalid Content-Length")
            if int(declared) > max_body_bytes:
                return refuse(413, "too_large", f"body over the limit of {max_body_bytes} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_body_bytes:
                return refuse(413, "too_large", f"body over the limit of {max_body_bytes} bytes")
        try:
            document = json.loads(bytes(body))
        except (ValueError, RecursionError) as exc:
            return refuse(422, "invalid", f"invalid JSON: {exc}"[:300])
        try:
            payload = AlertmanagerPayload.model_validate(document)
        except ValidationError as exc:
            return refuse(422, "invalid", _validation_message(exc)[:500])
        try:
            summary = await run_in_threadpool(service.handle, payload)
        except QueueFullError as exc:
            return refuse(503, "queue_full", f"{exc}; retry later", {"Retry-After": "10"})
        metrics.requests.labels("ok").inc()
        return JSONResponse(summary)

    @router.get("/incidents/metrics")
    def incident_metrics() -> Response:
        return Response(metrics.text(), media_type=CONTENT_TYPE_LATEST)

    @router.get("/incidents", response_model=None)
    def list_incidents(
        request: Request,
        limit: int = Query(50, ge=1, le=1000),
        status: Literal["firing", "resolved"] | None = None,
    ) -> Response:
        found = store.list(limit, status)
        if _wants_html(request):
            return HTMLResponse(incidents_html(found))
        return JSONResponse(found)

    @router.get("/incidents/{incident_id}", response_model=None)
    def show_incident(request: Request, incident_id: int) -> Response:
        found = store.get(incident_id)
        if found is None:
            message = f"no incident {incident_id}"
            if _wants_html(request):
                return HTMLResponse(_page("Not found", f"<p>{_e(message)}</p>"), status_code=404)
            return JSONResponse({"error": message}, status_code=404)
        if _wants_html(request):
            return HTMLResponse(incident_html(found))
        return JSONResponse(found)

    return router
