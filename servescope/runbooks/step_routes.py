"""Running one step from a runbook page: `POST /runbooks/{alert}/steps/{id}/run`.

    {"labels": {...}, "execute": false} -> StepResult JSON

Read steps need no token. Change steps need `Authorization: Bearer <token>`; without a configured token
they are always refused (403), a missing or wrong one is 401, and a valid one runs dry unless `execute`
is true. Every request that is not a read step's (a change step's, an unknown step's, a malformed one)
is recorded in the audit log before anything runs; when that record cannot be written nothing runs and
the answer is 503, naming why. Steps run on the pages' own bounded pool, never the quick routes'.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.concurrency import run_in_threadpool

from servescope.runbooks.actions import RunContext
from servescope.runbooks.asgi import DEFAULT_BODY_LIMIT, BodyTimeoutError, BodyTooLargeError, read_body
from servescope.runbooks.audit import AuditError, Outcome
from servescope.runbooks.auth import NOT_CONFIGURED, Refusal, bearer, caller_host, refusal
from servescope.runbooks.document import Runbook, RunbookError, Step, UnknownAlertError
from servescope.runbooks.runbook_routes import Pages
from servescope.runbooks.runner import ParamError, bind_step, run_bound
from servescope.runbooks.step_pool import PoolBusyError

log = logging.getLogger(__name__)
MAX_LABELS, MAX_LABEL_NAME, MAX_LABEL_VALUE = 64, 128, 1024
# What a refused change-step request is answered: status, message, WWW-Authenticate.
_REFUSALS: dict[Refusal, tuple[int, str, str | None]] = {
    "refused_not_configured": (403, NOT_CONFIGURED, None),
    "refused_no_token": (401, "change steps need the header Authorization: Bearer <token>", "Bearer"),
    "refused_bad_token": (401, "the bearer token is not valid", 'Bearer error="invalid_token"'),
}


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    labels: dict[str, str] = Field(default_factory=dict)
    execute: bool = False

    @field_validator("labels")
    @classmethod
    def _bounded(cls, labels: dict[str, str]) -> dict[str, str]:
        if len(labels) > MAX_LABELS:
            raise ValueError(f"{len(labels)} labels: at most {MAX_LABELS}")
        for name, value in labels.items():
            if len(name) > MAX_LABEL_NAME or len(value) > MAX_LABEL_VALUE:
                raise ValueError(
                    f"label {name[:40]!r}: names are at most {MAX_LABEL_NAME} characters and values "
                    f"at most {MAX_LABEL_VALUE}"
                )
        return labels


def _detail(message: str, status: int, authenticate: str | None = None) -> JSONResponse:
    headers = {"WWW-Authenticate": authenticate} if authenticate else None
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


@dataclass(frozen=True)
class Call:
    """One request to the run route, as read from the socket: who, with what token, and the body."""

    alert: str
    step_id: str
    host: str | None
    presented: str | None
    body: RunRequest | str  # the request, or why its body is not one
    ctx: RunContext
    body_status: int = 422  # the answer to a body that is not a request (413: too large)

    def labels(self) -> dict[str, str] | None:
        return self.body.labels if isinstance(self.body, RunRequest) else None

    def execute(self) -> bool:
        return isinstance(self.body, RunRequest) and self.body.execute


def _parsed(raw: bytes) -> RunRequest | str:
    try:
        return RunRequest.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        return f"invalid request body{' at ' + where if where else ''}: {error['msg']}"[:300]


def _record(pages: Pages, call: Call, outcome: Outcome, message: str, **extra: Any) -> None:
    """One audit line; an outcome after a run leaves the labels out (its `accepted` line has them)."""
    pages.audit.record(
        host=call.host,
        token=call.presented,
        alert=call.alert,
        step=call.step_id,
        parameters=extra.get("parameters"),
        labels=None if extra.get("after_run") else call.labels(),
        execute=call.execute(),
        outcome=outcome,
        message=message,
    )


def _record_refusal(pages: Pages, call: Call, outcome: Outcome, message: str) -> None:
    """Record a request that runs nothing; its answer stands even when the record cannot be written."""
    try:
        _record(pages, call, outcome, message)
    except AuditError as exc:
        log.error("%s (a %s request to %s/%s)", exc, outcome, call.alert, call.step_id)


def _find(pages: Pages, alert: str, step_id: str) -> tuple[Runbook, Step] | JSONResponse:
    try:
        runbook = pages.load(alert)
    except UnknownAlertError as exc:
        return _detail(str(exc), 404)
    except RunbookError as exc:
        return _detail(str(exc), 500)
    step = runbook.step(step_id)
    if step is None:
        known = ", ".join(s.id for s in runbook.steps)
        return _detail(f"{alert} has no step {step_id[:80]!r} (steps: {known})", 404)
    return runbook, step


def _token_refused(pages: Pages, call: Call) -> JSONResponse | None:
    """The refusal of a change request whose token is missing or wrong (recorded), else None."""
    refused = refusal(pages.token, call.presented)
    if refused is None:
        return None
    status, message, authenticate = _REFUSALS[refused]
    _record_refusal(pages, call, refused, message)
    return _detail(message, status, authenticate)


def refused_while_busy(pages: Pages, call: Call, message: str) -> JSONResponse:
    """The answer when the step pool is full: a change step's bad token is still 401 (checked first in
    every state), anything else 503 to retry; both recorded."""
    found = _find(pages, call.alert, call.step_id)
    if not isinstance(found, JSONResponse) and found[1].kind == "change":
        refused = _token_refused(pages, call)
        if refused is not None:
            return refused
    _record_refusal(pages, call, "refused_busy", message)
    return JSONResponse({"detail": message}, status_code=503, headers={"Retry-After": "5"})


def _change(pages: Pages, call: Call, step: Step) -> JSONResponse:
    """Token first (a wrong one is 401 whatever else is wrong), then the body, the parameters, the
    record of the accepted request, and only then the run."""
    refused = _token_refused(pages, call)
    if refused is not None:
        return refused
    if not isinstance(call.body, RunRequest):
        _record_refusal(pages, call, "malformed", call.body)
        return _detail(call.body, call.body_status)
    try:
        bound = bind_step(step, call.body.labels)
    except ParamError as exc:
        _record_refusal(pages, call, "failed", f"invalid parameters: {exc}")
        return _detail(str(exc), 422)
    parameters = bound.params.model_dump(mode="json")
    try:
        _record(pages, call, "accepted", "about to run", parameters=parameters)
    except AuditError as exc:
        log.error("%s: change step %s/%s not run", exc, call.alert, call.step_id)
        return _detail(f"not run: {exc}", 503)
    result = run_bound(bound, call.ctx.model_copy(update={"execute": call.body.execute}))
    outcome: Outcome = ("executed" if call.body.execute else "dry_run") if result.ok else "failed"
    try:
        _record(pages, call, outcome, result.output, parameters=parameters, after_run=True)
    except AuditError as exc:
        log.error("%s: the outcome of change step %s/%s is not recorded", exc, call.alert, call.step_id)
    return JSONResponse(result.model_dump(mode="json"))


def handle(pages: Pages, call: Call) -> JSONResponse:
    """One run request, on a pool thread (loading the runbook, writing the audit log and running block)."""
    found = _find(pages, call.alert, call.step_id)
    if isinstance(found, JSONResponse):
        _record_refusal(pages, call, "unknown_step", bytes(found.body).decode()[:300])
        return found
    _, step = found
    if step.kind == "change":
        return _change(pages, call, step)
    if not isinstance(call.body, RunRequest):
        return _detail(call.body, call.body_status)
    try:
        bound = bind_step(step, call.body.labels)
    except ParamError as exc:
        return _detail(str(exc), 422)
    result = run_bound(bound, call.ctx)
    if result.data.get("refused"):
        _record_refusal(pages, call, "refused_target", result.output)
    return JSONResponse(result.model_dump(mode="json"))


async def _call(pages: Pages, alert: str, step_id: str, request: Request) -> Call:
    peer = request.client.host if request.client is not None else None
    status = 422
    try:
        body: RunRequest | str = _parsed(await read_body(request, DEFAULT_BODY_LIMIT))
    except BodyTooLargeError as exc:
        body, status = str(exc), 413
    except BodyTimeoutError as exc:
        body, status = str(exc), 408
    except ValueError as exc:
        body = str(exc)
    ctx = pages.ctx_factory(request)
    if isinstance(body, RunRequest):
        ctx = ctx.for_labels(body.labels)
    return Call(
        alert=alert,
        step_id=step_id,
        host=caller_host(peer, request.headers.get("x-forwarded-for"), pages.trusted_proxies),
        presented=bearer(request.headers.get("authorization")),
        body=body,
        ctx=ctx,
        body_status=status,
    )


def add_step_routes(router: APIRouter, pages: Pages) -> None:
    @router.post("/runbooks/{alert}/steps/{step_id}/run")
    async def run_step(alert: str, step_id: str, request: Request) -> JSONResponse:
        call = await _call(pages, alert, step_id, request)
        try:
            answer = await pages.pool.run(handle, pages, call)
        except PoolBusyError as exc:
            # Answered on the quick routes' threads: the step pool is the one that is full.
            return await run_in_threadpool(refused_while_busy, pages, call, str(exc))
        if call.body_status in (408, 413):
            answer.headers["Connection"] = "close"  # the rest of the body is never read
        return answer
