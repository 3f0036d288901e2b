"""Change actions: they print the exact command, patch or request, and act only when executed.

`ctx.execute` is False unless the operator passed --execute for this one step. Commands are fixed argv
lists built from typed parameters (Kubernetes names cannot start with '-', so none reads as an option) and
run without a shell. `lower_max_num_seqs` never acts, even when executed: a serving engine's settings are
changed through its deployment, by people.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import httpx
from pydantic import Field, model_validator

from servescope.runbooks.actions.base import ActionError, RunContext, StepResult, action
from servescope.runbooks.actions.fetch import request
from servescope.runbooks.actions.kube import kubectl_change
from servescope.runbooks.actions.params import (
    Comment,
    HttpUrl,
    K8sName,
    LabelName,
    LabelValue,
    ModelName,
    Params,
    Window,
    window_seconds,
)

MAX_SILENCE_SECONDS = 7 * 86400


class NodeParams(Params):
    node: K8sName


@action("cordon_node", "change", NodeParams)
def cordon_node(params: NodeParams, ctx: RunContext) -> StepResult:
    """Mark a node unschedulable (kubectl cordon); running pods stay."""
    return kubectl_change(
        [ctx.kubectl, "cordon", params.node], f"Cordon node {params.node}", ctx, ctx.timeout_seconds
    )


class MaxNumSeqsParams(Params):
    endpoint: HttpUrl | None = None
    model_name: ModelName | None = None
    value: Annotated[int, Field(ge=1, le=4096)]

    @model_validator(mode="after")
    def _target(self) -> MaxNumSeqsParams:
        if self.endpoint is None and self.model_name is None:
            raise ValueError("give endpoint or model_name: which engine to change")
        return self


@action("lower_max_num_seqs", "change", MaxNumSeqsParams)
def lower_max_num_seqs(params: MaxNumSeqsParams, ctx: RunContext) -> StepResult:
    """The patch that sets an engine's max_num_seqs, and the rolling-restart plan (never applied here)."""
    target = " at ".join(x for x in (params.model_name, params.endpoint) if x)
    args = ["--max-num-seqs", str(params.value)]
    patch = {
        "op": "engine argument",
        "set": args,
        "target": {"model_name": params.model_name, "endpoint": params.endpoint},
    }
    lines = [
        f"Patch for {target}: start vLLM with",
        f"  {' '.join(args)}",
        "  (in a Kubernetes Deployment: the engine container's args; with the vLLM CLI: "
        f"`vllm serve ... {' '.join(args)}`; Python: LLM(..., max_num_seqs={params.value}))",
        "Rolling-restart plan (vLLM reads max_num_seqs only at start):",
        "  1. check spare capacity first: a restarting replica serves nothing while the model loads "
        "(minutes for a large model); keep 20% spare, add a worker first if below (3-5 min)",
        "  2. change one replica; wait for /health and for it to take traffic",
        "  3. watch its P99 time to first token, requests waiting and preemptions for 10 minutes",
        "  4. roll the other replicas one at a time (maxUnavailable 1, maxSurge 1)",
        "  5. roll back to the previous value if P99 or the queue get worse",
        "A smaller batch lowers P99 latency immediately and costs throughput (QPS per GPU).",
    ]
    if ctx.execute:
        lines.append(
            "Nothing was executed: this action only prints the change; apply it through the deployment."
        )
    return StepResult(
        ok=True,
        title=f"Set max_num_seqs={params.value} for {target}",
        output="\n".join(lines),
        data={"patch": patch, "vllm_args": args},
        dry_run=True,
    )


class SilenceParams(Params):
    alertname: LabelValue
    matchers: Annotated[dict[LabelName, LabelValue], Field(max_length=20)] = Field(default_factory=dict)
    duration: Window = "1h"
    comment: Comment
    created_by: Annotated[LabelValue, Field(max_length=128)] = "servescope runbook"

    @model_validator(mode="after")
    def _checks(self) -> SilenceParams:
        if "alertname" in self.matchers:
            raise ValueError("matchers: give the alert name as `alertname`, not as a matcher")
        if window_seconds(self.duration) > MAX_SILENCE_SECONDS:
            raise ValueError(f"duration {self.duration}: a runbook silence lasts 7d at most")
        return self


def silence_body(params: SilenceParams, now: datetime) -> dict[str, Any]:
    """The Alertmanager v2 silence: equality matchers only (values are matched literally, never as regex)."""
    matchers = [{"name": "alertname", "value": params.alertname, "isRegex": False, "isEqual": True}]
    matchers += [
        {"name": name, "value": value, "isRegex": False, "isEqual": True}
        for name, value in sorted(params.matchers.items())
    ]
    ends = now + timedelta(seconds=window_seconds(params.duration))
    return {
        "matchers": matchers,
        "startsAt": now.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "endsAt": ends.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "createdBy": params.created_by,
        "comment": params.comment,
    }


@action("create_silence", "change", SilenceParams)
def create_silence(params: SilenceParams, ctx: RunContext) -> StepResult:
    """Silence an alert in Alertmanager for a while (POST /api/v2/silences)."""
    body = silence_body(params, datetime.now(UTC))
    text = json.dumps(body, indent=2, ensure_ascii=False)
    title = f"Silence {params.alertname} for {params.duration}"
    url = (ctx.alertmanager_url or "<--alertmanager-url>").rstrip("/") + "/api/v2/silences"
    if not ctx.execute:
        return StepResult(
            ok=True,
            title=title,
            output=f"dry run: would POST to {url}\n{text}\n(run this step with --execute to do it)",
            data={"silence": body, "url": url},
            command=None,
            dry_run=True,
        )
    if not ctx.alertmanager_url:
        raise ActionError("no Alertmanager to create the silence in: pass --alertmanager-url")
    try:
        response = request("POST", url, body=body, timeout=ctx.timeout_seconds)
    except httpx.TransportError as exc:
        raise ActionError(f"cannot reach Alertmanager at {ctx.alertmanager_url}: {exc}") from None
    if response.status_code != 200:
        raise ActionError(
            f"Alertmanager refused the silence: HTTP {response.status_code}: {response.text[:300]}"
        )
    try:
        silence_id = response.json().get("silenceID")
    except ValueError:
        silence_id = None
    return StepResult(
        ok=True,
        title=title,
        output=f"created silence {silence_id} at {url} until {body['endsAt']}\n{text}",
        data={"silence": body, "url": url, "silence_id": silence_id},
    )
