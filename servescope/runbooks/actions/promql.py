"""`promql`: an instant query against Prometheus; label values go in only as escaped string literals.

The query is a literal of the runbook (never bound from a label) with `$name` placeholders; each one is
replaced by the step's parameter `name` (usually "{{ labels.name }}"), written as a PromQL double-quoted
string literal with every backslash, quote and control character escaped. So
`servescope_gpu_up{gpu=$gpu}` with gpu = `0"} or vector(1) #` queries the series whose gpu label is
that whole odd string, and nothing else.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import ConfigDict, Field, PlainValidator, model_validator

from servescope.core.promql_literal import promql_string
from servescope.runbooks.actions.base import ActionError, RunContext, StepResult, action
from servescope.runbooks.actions.fetch import UnreachableError, request
from servescope.runbooks.actions.params import LabelName, LabelValue, LiteralOnly, Params
from servescope.runbooks.actions.text import table

PLACEHOLDER = re.compile(r"\$([a-zA-Z_][a-zA-Z0-9_]*)", re.ASCII)
_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*", re.ASCII)


def _query(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a PromQL query (a non-empty string)")
    if len(value) > 4000:
        raise ValueError(f"expected a PromQL query of 4000 characters at most, got {len(value)}")
    if "\x00" in value:
        raise ValueError("expected a PromQL query: contains a NUL character")
    return value


PromQLTemplate = Annotated[str, PlainValidator(_query, json_schema_input_type=str), LiteralOnly()]


class PromqlParams(Params):
    """`query` (literal) and a value for each `$name` placeholder: a parameter `name`, or an entry of the
    `labels` mapping (both forms work; usually "{{ labels.name }}")."""

    model_config = ConfigDict(extra="allow", frozen=True)
    __pydantic_extra__: dict[str, LabelValue] = Field(init=False)

    query: PromQLTemplate
    labels: Annotated[dict[LabelName, LabelValue], Field(max_length=20)] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _placeholders(self) -> PromqlParams:
        extra = dict(self.model_extra or {})
        for name in extra:
            if _NAME.fullmatch(name) is None:
                raise ValueError(f"{name[:40]!r}: a placeholder name is [a-zA-Z_][a-zA-Z0-9_]*")
            if name in self.labels:
                raise ValueError(f"{name!r} is given both as a parameter and in labels")
        values = self.values()
        if len(values) > 20:
            raise ValueError("at most 20 placeholders")
        used = set(PLACEHOLDER.findall(self.query))
        missing = sorted(used - set(values))
        if missing:
            raise ValueError(f"query uses ${missing[0]} but no parameter {missing[0]!r} gives its value")
        unused = sorted(set(values) - used)
        if unused:
            raise ValueError(f"parameter {unused[0]!r} is not used by the query (no ${unused[0]} in it)")
        return self

    def values(self) -> dict[str, str]:
        return {**self.labels, **(self.model_extra or {})}

    def render(self) -> str:
        values = self.values()
        return PLACEHOLDER.sub(lambda m: promql_string(values[m.group(1)]), self.query)


def _series(metric: dict[str, str]) -> str:
    name = metric.get("__name__", "")
    rest = ", ".join(f"{k}={promql_string(v)}" for k, v in sorted(metric.items()) if k != "__name__")
    return f"{name}{{{rest}}}"


def _ask(ctx: RunContext, prometheus_url: str, query: str) -> dict[str, Any]:
    """The `data` of Prometheus' answer to an instant query; ActionError says why there is none."""
    url = prometheus_url.rstrip("/") + "/api/v1/query"
    try:
        response = request("GET", url, params={"query": query}, timeout=ctx.timeout_seconds)
    except UnreachableError as exc:
        raise ActionError(
            f"cannot reach Prometheus at {prometheus_url}: {exc}; is --prometheus-url right?"
        ) from None
    try:
        answer = response.json()
    except ValueError:
        raise ActionError(
            f"Prometheus {url}: HTTP {response.status_code}, not JSON: {response.text[:200]}"
        ) from None
    if answer.get("status") != "success":
        raise ActionError(
            f"Prometheus refused the query {query}: {answer.get('errorType', '')}: {answer.get('error', '')}"
        )
    return dict(answer.get("data", {}))


def _body(kind: Any, values: Any) -> str:
    if kind == "vector":
        rows = [[_series(r.get("metric", {})), str(r.get("value", [None, "?"])[1])] for r in values]
        return table(["series", "value"], rows) if rows else "(empty result: no series matched)"
    if kind == "matrix":
        rows = [
            [_series(r.get("metric", {})), f"{len(r.get('values', []))} samples, last {r['values'][-1][1]}"]
            for r in values
            if r.get("values")
        ]
        return table(["series", "values"], rows) if rows else "(empty result)"
    return f"{kind}: {values[1] if isinstance(values, list) and len(values) > 1 else values}"


@action("promql", "read", PromqlParams)
def promql(params: PromqlParams, ctx: RunContext) -> StepResult:
    """An instant PromQL query against Prometheus (label values inserted as escaped string literals)."""
    query = params.render()
    if not ctx.prometheus_url:
        raise ActionError(f"no Prometheus to ask: pass --prometheus-url (the query would be: {query})")
    result = _ask(ctx, ctx.prometheus_url, query)
    kind, values = result.get("resultType"), result.get("result")
    return StepResult(
        ok=True,
        title="PromQL",
        output=f"query: {query}\n{_body(kind, values)}",
        data={"query": query, "resultType": kind, "result": values},
    )
