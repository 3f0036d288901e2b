"""The Kubernetes API for the change actions: a change runs only when executed; the reads it rests on
always run.

Every change is described as the API call it is (method, path, content type, body), printed by the dry
run exactly as the execution sends it through the client (`core/kube.py`, lightkube). Reads run in the
dry run too, so it shows what the execution would find: the current replica count, an autoscaler that
owns a Deployment, the PodDisruptionBudgets a drain would meet. An answer of the API server is reported
with its Status (a 403 names the verb the Role lacks).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx2

from servescope.core.kube import ApiError, KubeAccess, KubeConfigError, client, describe_api_error
from servescope.runbooks.actions.base import ActionError, RunContext, StepResult

T = TypeVar("T")
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
JSON = "application/json"


@dataclass(frozen=True)
class ApiCall:
    """One request to the API server, as the dry run prints it and the execution sends it."""

    method: str
    path: str
    body: dict[str, Any] | list[dict[str, Any]] | None = None  # a list: a JSON patch's operations
    content_type: str | None = None

    def shown(self) -> str:
        kind = f" ({self.content_type})" if self.content_type else ""
        body = f"\n    {json.dumps(self.body, sort_keys=True)}" if self.body is not None else ""
        return f"  {self.method} {self.path}{kind}{body}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "content_type": self.content_type,
            "body": self.body,
        }


class ApiRefusedError(ActionError):
    """The API server answered with an error Status; `code` is its HTTP status, `status` its text."""

    reason = "api_refused"

    def __init__(self, message: str, code: int, status: str) -> None:
        super().__init__(message)
        self.code, self.status = code, status


def access(ctx: RunContext) -> KubeAccess:
    return KubeAccess(
        api_url=ctx.kube_api_url,
        token_file=ctx.kube_token_file,
        ca_file=ctx.kube_ca_file,
        kubeconfig=ctx.kubeconfig,
        timeout_seconds=ctx.timeout_seconds,
    )


def api(ctx: RunContext, what: str, call: Callable[[Any], T]) -> T:
    """`call(client)`, its failures as ActionError naming `what` and the API server's answer."""
    try:
        return call(client(access(ctx)))
    except KubeConfigError as exc:
        raise ActionError(str(exc)) from None
    except ApiError as exc:
        status = describe_api_error(exc)
        raise ApiRefusedError(
            f"{what}: the API server answered {status}", int(exc.status.code or 0), status
        ) from None
    except httpx2.HTTPError as exc:
        raise ActionError(f"{what}: cannot reach {access(ctx).describe()}: {exc}") from None


def dry_run(title: str, calls: Sequence[ApiCall], notes: Sequence[str] = (), **data: Any) -> StepResult:
    """What the execution would send, call by call; `notes` (what the reads found) come first."""
    lines = [*notes, "dry run: would call the Kubernetes API", *(c.shown() for c in calls)]
    lines.append("(run this step with --execute to do it)")
    return StepResult(
        ok=True,
        title=title,
        output="\n".join(lines),
        data={**data, "api_calls": [c.as_dict() for c in calls]},
        dry_run=True,
    )


def executed(title: str, calls: Sequence[ApiCall], lines: Sequence[str], ok: bool, **data: Any) -> StepResult:
    """The result of calls sent: each call, then what came of them."""
    output = "\n".join(["called the Kubernetes API", *(c.shown() for c in calls), *lines])
    return StepResult(
        ok=ok, title=title, output=output, data={**data, "api_calls": [c.as_dict() for c in calls]}
    )


def named(namespace: str | None, name: str | None) -> str:
    """namespace/name of an object, as kubectl shows it."""
    return f"{namespace or '-'}/{name or '?'}"


def selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector (as a dict) against a pod's labels: a missing selector matches
    nothing, {} all."""
    if not isinstance(selector, Mapping):
        return False
    wanted = selector.get("matchLabels") or {}
    if not isinstance(wanted, Mapping) or any(labels.get(k) != v for k, v in wanted.items()):
        return False
    expressions = selector.get("matchExpressions") or []
    return isinstance(expressions, list) and all(_expression(e, labels) for e in expressions)


def _expression(expression: Any, labels: Mapping[str, str]) -> bool:
    if not isinstance(expression, Mapping):
        return False
    key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
    present = isinstance(key, str) and key in labels
    value = labels.get(key) if isinstance(key, str) else None
    if operator == "In":
        return present and value in values
    if operator == "NotIn":
        return not present or value not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    return False  # the API server accepts only the four operators above
