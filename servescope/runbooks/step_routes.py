"""Running one step from a runbook page: `POST /runbooks/{alert}/steps/{id}/run`.

    {"labels": {...}, "execute": false} -> StepResult JSON

Read steps need no token. Change steps need `Authorization: Bearer <token>`; without a configured token
they are always refused (403), a missing or wrong one is 401, and a valid one runs dry unless `execute`
is true. Every change-step request is recorded in the audit log, whatever its outcome.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from servescope.runbooks.audit import Outcome
from servescope.runbooks.auth import NOT_CONFIGURED, Refusal, bearer, refusal
from servescope.runbooks.document import Runbook, RunbookError, Step, UnknownAlertError
from servescope.runbooks.runbook_routes import Pages
from servescope.runbooks.runner import ParamError, bind_step, run_bound

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


def _detail(message: str, status: int, authenticate: str | None = None) -> JSONResponse:
    headers = {"WWW-Authenticate": authenticate} if authenticate else None
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


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


class _ChangeRequest:
    """One change-step request: checked against the token, run, and recorded in the audit log."""

    def __init__(
        self, pages: Pages, runbook: Runbook, step: Step, body: RunRequest, request: Request
    ) -> None:
        self.pages, self.runbook, self.step, self.body = pages, runbook, step, body
        self.presented = bearer(request.headers.get("authorization"))
        self.host = request.client.host if request.client is not None else None
        self.ctx = pages.ctx_factory(request).for_labels(body.labels)

    def record(self, outcome: Outcome, message: str, parameters: dict[str, Any] | None = None) -> None:
        self.pages.audit.record(
            host=self.host,
            token=self.presented,
            alert=self.runbook.alert,
            step=self.step.id,
            parameters=parameters,
            labels=self.body.labels,
            execute=self.body.execute,
            outcome=outcome,
            message=message,
        )

    def answer(self) -> JSONResponse:
        refused = refusal(self.pages.token, self.presented)
        if refused is not None:
            status, message, authenticate = _REFUSALS[refused]
            self.record(refused, message)
            return _detail(message, status, authenticate)
        try:
            bound = bind_step(self.step, self.body.labels)
        except ParamError as exc:
            self.record("failed", f"invalid parameters: {exc}")
            return _detail(str(exc), 422)
        parameters = bound.params.model_dump(mode="json")
        result = run_bound(bound, self.ctx.model_copy(update={"execute": self.body.execute}))
        outcome: Outcome = ("executed" if self.body.execute else "dry_run") if result.ok else "failed"
        self.record(outcome, result.output, parameters)
        return JSONResponse(result.model_dump(mode="json"))


def add_step_routes(router: APIRouter, pages: Pages) -> None:
    @router.post("/runbooks/{alert}/steps/{step_id}/run")
    def run_step(alert: str, step_id: str, body: RunRequest, request: Request) -> JSONResponse:
        found = _find(pages, alert, step_id)
        if isinstance(found, JSONResponse):
            return found
        runbook, step = found
        if step.kind == "change":
            return _ChangeRequest(pages, runbook, step, body, request).answer()
        try:
            bound = bind_step(step, body.labels)
        except ParamError as exc:
            return _detail(str(exc), 422)
        ctx = pages.ctx_factory(request).for_labels(body.labels)
        return JSONResponse(run_bound(bound, ctx).model_dump(mode="json"))
