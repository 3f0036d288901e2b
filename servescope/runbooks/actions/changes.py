"""Change actions: they print the exact API call, patch or request, and act only when executed.

`ctx.execute` is False unless the operator passed --execute for this one step (or a token-bearing request
asked for it). Kubernetes is changed through its API (`kube.py`), with calls built from typed parameters.
`lower_max_num_seqs` never acts, even when executed: a serving engine's settings are changed through its
deployment, by people.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType
from pydantic import Field, model_validator

from servescope.runbooks.actions.base import ActionError, RunContext, StepResult, action
from servescope.runbooks.actions.fetch import UnreachableError, request
from servescope.runbooks.actions.kube import STRATEGIC, ApiCall, api, dry_run, executed
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


CORDON = {"spec": {"unschedulable": True}}


def cordon_call(node: str) -> ApiCall:
    return ApiCall("PATCH", f"/api/v1/nodes/{node}", CORDON, STRATEGIC)


@action("cordon_node", "change", NodeParams)
def cordon_node(params: NodeParams, ctx: RunContext) -> StepResult:
    """Mark a node unschedulable (PATCH spec.unschedulable, as kubectl cordon); running pods stay."""
    title = f"Cordon node {params.node}"
    node = api(ctx, f"reading node {params.node}", lambda c: c.get(Node, params.node))
    was = "unschedulable already" if node.spec and node.spec.unschedulable else "schedulable now"
    call = cordon_call(params.node)
    if not ctx.execute:
        return dry_run(title, [call], [f"node {params.node} is {was}"])
    api(
        ctx,
        f"cordoning node {params.node}",
        lambda c: c.patch(Node, params.node, CORDON, patch_type=PatchType.STRATEGIC),
    )
    return executed(title, [call], [f"node {params.node} is unschedulable (it was {was})"], ok=True)


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
    except UnreachableError as exc:
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
