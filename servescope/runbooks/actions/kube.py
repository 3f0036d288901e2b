"""kubectl for the change actions: a change runs only when executed; the reads it rests on always run.

Every call is a fixed argv (no shell). Reads (`kubectl get ... -o json`) run in the dry run too, so the
dry run shows what the execution would find: the current replica count, an autoscaler that owns a
Deployment, the PodDisruptionBudgets a drain would meet.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from servescope.runbooks.actions.base import ActionError, RunContext, StepResult, run_argv, shown, tail

MAX_JSON_CHARS = 32 * 2**20  # a node's pods or a namespace's budgets are far below this
_NO_SUCH_TYPE = "the server doesn't have a resource type"


def kubectl_change(
    argv: list[str], title: str, ctx: RunContext, timeout: float, notes: Sequence[str] = ()
) -> StepResult:
    """Print `argv` (dry run) or run it (executed); `notes` (what the reads found) come first."""
    found = "".join(f"{note}\n" for note in notes)
    if not ctx.execute:
        return StepResult(
            ok=True,
            title=title,
            output=f"{found}dry run: would run\n  {shown(argv)}\n(run this step with --execute to do it)",
            command=argv,
            dry_run=True,
        )
    done = _run(argv, ctx, timeout)
    output = "\n".join(
        part for part in (found.rstrip(), f"$ {shown(argv)}", tail(done[1]), tail(done[2])) if part.strip()
    )
    return StepResult(
        ok=done[0] == 0,
        title=title,
        output=output + ("" if done[0] == 0 else f"\nexited {done[0]}"),
        data={"returncode": done[0]},
        command=argv,
    )


def _run(argv: list[str], ctx: RunContext, timeout: float) -> tuple[int, str, str]:
    try:
        done = run_argv(argv, timeout=timeout)
    except FileNotFoundError:
        raise ActionError(f"{ctx.kubectl!r} not found: install kubectl or pass --kubectl PATH") from None
    return done.returncode, done.stdout, done.stderr


def get_json(ctx: RunContext, what: list[str], *, optional_type: bool = False) -> dict[str, Any] | None:
    """`kubectl get <what> -o json`, parsed; None when `optional_type` and the cluster lacks the type."""
    argv = [ctx.kubectl, "get", *what, "--output=json"]
    code, stdout, stderr = _run(argv, ctx, ctx.timeout_seconds)
    if code != 0:
        if optional_type and _NO_SUCH_TYPE in stderr:
            return None
        raise ActionError(f"{shown(argv)} exited {code}: {tail(stderr.strip(), 600) or '(no message)'}")
    if len(stdout) > MAX_JSON_CHARS:
        raise ActionError(f"{shown(argv)}: {len(stdout)} characters of output, over {MAX_JSON_CHARS}")
    try:
        answer = json.loads(stdout)
    except ValueError as exc:
        raise ActionError(f"{shown(argv)}: not JSON ({exc}): {stdout[:200]!r}") from None
    if not isinstance(answer, dict):
        raise ActionError(f"{shown(argv)}: expected a JSON object, got {type(answer).__name__}")
    return answer


def items(answer: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The objects of a `kind: List` answer (none for a missing one); anything but an object is skipped."""
    found = (answer or {}).get("items")
    return [item for item in found if isinstance(item, dict)] if isinstance(found, list) else []


def field(obj: Mapping[str, Any], *path: str) -> Any:
    """obj[path[0]][path[1]]...; None where a step is missing or not an object."""
    value: Any = obj
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def named(obj: Mapping[str, Any]) -> str:
    """namespace/name of an object, as kubectl shows it."""
    return f"{field(obj, 'metadata', 'namespace') or '-'}/{field(obj, 'metadata', 'name') or '?'}"


def selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector against a pod's labels: a missing selector matches nothing, {} all."""
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
