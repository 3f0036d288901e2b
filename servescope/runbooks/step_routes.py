"""Running one step from a runbook page: `POST /runbooks/{alert}/steps/{id}/run`.

    {"labels": {...}, "execute": false} -> StepResult JSON

Read steps need no token. Change steps need `Authorization: Bearer <token>`; without a configured token
they are always refused (403), a missing or wrong one is 401, and a valid one runs dry unless `execute`
is true. A request with a valid token to the run route (a change step's, an unknown step's, a malformed
one) is recorded in the audit trail before anything runs; when that record cannot be written nothing
runs and the answer is 503, naming why. A request without a valid token is refused, counted and logged
(`refusals.py`), never recorded: the trail is only for those who may act. Steps run on the pages' own
bounded pool, never the quick routes'.
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
from servescope.runbooks.refusals import refused
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


def _record(pages: Pages, call: Call, identity: str, outcome: Outcome, message: str, **extra: Any) -> None:
    """One audit record of an authenticated request; an outcome after a run leaves the labels out (its
    `accepted` record has them). AuditError when it cannot be written."""
    pages.audit.record(
        host=call.host,
        identity=identity,
        token=call.presented,
        alert=call.alert,
        step=call.step_id,
        parameters=extra.get("parameters"),
        labels=None if extra.get("after_run") else call.labels(),
        execute=call.execute(),
        outcome=outcome,
        message=message,
    )


def _record_outcome(pages: Pages, call: Call, identity: str, outcome: Outcome, message: str) -> None:
    """Record an authenticated request that runs nothing; its answer stands even when the record cannot
    be written (nothing was done)."""
    try:
        _record(pages, call, identity, outcome, message)
    except AuditError as exc:
        log.error("%s (a %s request to %s/%s)", exc, outcome, call.alert, call.step_id)


def _identity(pages: Pages, call: Call) -> str | None:
    """The name of the valid change token the call presents, None without one."""
    return refusal(pages.tokens, call.presented)[1]


def _not_audited(call: Call, reason: str, message: str) -> None:
    """A request nobody authenticated: counted and logged (rate-limited), never an audit record."""
    refused(reason, f"{call.host}: {call.alert[:80]}/{call.step_id[:80]}: {message}")


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


def _token_refused(pages: Pages, call: Call) -> JSONResponse | str:
    """The refusal of a change request whose token is missing or wrong (counted), else the token's name."""
    refused_as, identity = refusal(pages.tokens, call.presented)
    if refused_as is None:
        assert identity is not None
        return identity
    status, message, authenticate = _REFUSALS[refused_as]
    _not_audited(call, refused_as, message)
    return _detail(message, status, authenticate)


def refused_while_busy(pages: Pages, call: Call, message: str) -> JSONResponse:
    """The answer when the step pool is full: a change step's bad token is still 401 (checked first in
    every state), an authenticated change request is recorded, anything else counted; 503 to retry."""
    found = _find(pages, call.alert, call.step_id)
    if not isinstance(found, JSONResponse) and found[1].kind == "change":
        identity = _token_refused(pages, call)
        if isinstance(identity, JSONResponse):
            return identity
        _record_outcome(pages, call, identity, "refused_busy", message)
    else:
        _not_audited(call, "refused_busy", message)
    return JSONResponse({"detail": message}, status_code=503, headers={"Retry-After": "5"})


def _change(pages: Pages, call: Call, step: Step) -> JSONResponse:
    """Token first (a wrong one is 401 whatever else is wrong), then the body, the parameters, the
    record of the accepted request, and only then the run."""
    identity = _token_refused(pages, call)
    if isinstance(identity, JSONResponse):
        return identity
    if not isinstance(call.body, RunRequest):
        _record_outcome(pages, call, identity, "malformed", call.body)
        return _detail(call.body, call.body_status)
    try:
        bound = bind_step(step, call.body.labels)
    except ParamError as exc:
        _record_outcome(pages, call, identity, "failed", f"invalid parameters: {exc}")
        return _detail(str(exc), 422)
    parameters = bound.params.model_dump(mode="json")
    try:
        _record(pages, call, identity, "accepted", "about to run", parameters=parameters)
    except AuditError as exc:
        log.error("%s: change step %s/%s not run", exc, call.alert, call.step_id)
        return _detail(f"not run: {exc}", 503)
    result = run_bound(bound, call.ctx.model_copy(update={"execute": call.body.execute}))
    outcome: Outcome = ("executed" if call.body.execute else "dry_run") if result.ok else "failed"
    try:
        _record(pages, call, identity, outcome, result.output, parameters=parameters, after_run=True)
    except AuditError as exc:
        log.error("%s: the outcome of change step %s/%s is not recorded", exc, call.alert, call.step_id)
    return JSONResponse(result.model_dump(mode="json"))


def handle(pages: Pages, call: Call) -> JSONResponse:
    """One run request, on a pool thread (loading the runbook, writing the audit log and running block)."""
    found = _find(pages, call.alert, call.step_id)
    if isinstance(found, JSONResponse):
        message = bytes(found.body).decode()[:300]
        identity = _identity(pages, call)
        if identity is None:
            _not_audited(call, "unknown_step", message)
        else:
            _record_outcome(pages, call, identity, "unknown_step", message)
        return found
    _, step = found
    if step.kind == "change":
        return _change(pages, call, step)
    if not isinstance(call.body, RunRequest):
        _not_audited(call, "too_large" if call.body_status == 413 else "malformed", call.body)
        return _detail(call.body, call.body_status)
    try:
        bound = bind_step(step, call.body.labels)
    except ParamError as exc:
        return _detail(str(exc), 422)
    result = run_bound(bound, call.ctx)
    if result.data.get("refused"):
        _not_audited(call, "refused_target", result.output)
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
        host=caller_host(peer, request.headers.getlist("x-forwarded-for"), pages.trusted_proxies),
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
