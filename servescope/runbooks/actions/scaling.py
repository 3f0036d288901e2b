"""`scale_deployment`: add (or, asked explicitly, remove) replicas relative to the current count.

The count is read first and passed as `--current-replicas`, so a change made meanwhile (by a person or
a controller) makes kubectl refuse instead of being overwritten. A Deployment that a
HorizontalPodAutoscaler or a KEDA ScaledObject owns is left alone: the autoscaler would undo the change.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictBool, model_validator

from servescope.runbooks.actions.base import ActionError, RunContext, StepResult, action
from servescope.runbooks.actions.kube import field, get_json, items, kubectl_change, named
from servescope.runbooks.actions.params import K8sName, LiteralOnly, Params

MAX_REPLICAS = 1000


class ScaleParams(Params):
    namespace: K8sName
    deployment: K8sName
    add: Annotated[int, Field(ge=-MAX_REPLICAS, le=MAX_REPLICAS)]
    allow_decrease: Annotated[StrictBool, LiteralOnly()] = False
    allow_zero: Annotated[StrictBool, LiteralOnly()] = False

    @model_validator(mode="after")
    def _checks(self) -> ScaleParams:
        if self.add == 0:
            raise ValueError("add: 0 changes nothing; give the replicas to add (a negative number removes)")
        if self.add < 0 and not self.allow_decrease:
            raise ValueError(
                f"add: {self.add} removes replicas mid-incident; write allow_decrease: true to mean it"
            )
        return self


def _owners(ctx: RunContext, params: ScaleParams) -> list[str]:
    """The autoscalers whose target is this Deployment: HPAs, and KEDA ScaledObjects where KEDA is."""
    where = f"--namespace={params.namespace}"
    hpas = items(get_json(ctx, ["horizontalpodautoscalers.autoscaling", where]))
    scaled = items(get_json(ctx, ["scaledobjects.keda.sh", where], optional_type=True))
    owners = [
        f"HorizontalPodAutoscaler {named(h)}"
        for h in hpas
        if field(h, "spec", "scaleTargetRef", "kind") == "Deployment"
        and field(h, "spec", "scaleTargetRef", "name") == params.deployment
    ]
    owners += [
        f"KEDA ScaledObject {named(s)}"
        for s in scaled
        if (field(s, "spec", "scaleTargetRef", "kind") or "Deployment") == "Deployment"
        and field(s, "spec", "scaleTargetRef", "name") == params.deployment
    ]
    return owners


def _current(ctx: RunContext, params: ScaleParams) -> int:
    deployment = get_json(ctx, [f"deployment/{params.deployment}", f"--namespace={params.namespace}"]) or {}
    replicas = field(deployment, "spec", "replicas")
    if replicas is None:
        return 1  # the API server's default for a Deployment without spec.replicas
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise ActionError(f"deployment {params.namespace}/{params.deployment}: spec.replicas {replicas!r}")
    return replicas


def _target(params: ScaleParams, current: int) -> int:
    target = current + params.add
    what = f"deployment {params.namespace}/{params.deployment} has {current} replica(s)"
    if target < 0:
        raise ActionError(f"{what}: {params.add:+d} would leave {target}; nothing was changed")
    if target == 0 and not params.allow_zero:
        raise ActionError(
            f"{what}: {params.add:+d} would scale it to 0 (the model stops serving); "
            "write allow_zero: true to mean it"
        )
    if target > MAX_REPLICAS:
        raise ActionError(f"{what}: {params.add:+d} would make {target}, over {MAX_REPLICAS}")
    return target


@action("scale_deployment", "change", ScaleParams)
def scale_deployment(params: ScaleParams, ctx: RunContext) -> StepResult:
    """Add replicas to a Deployment, from its current count (kubectl scale --current-replicas)."""
    owners = _owners(ctx, params)
    if owners:
        raise ActionError(
            f"deployment {params.namespace}/{params.deployment} is scaled by {', '.join(owners)}: "
            "kubectl scale would be undone by it; raise its minimum (minReplicas / minReplicaCount) "
            "instead. Nothing was changed."
        )
    current = _current(ctx, params)
    target = _target(params, current)
    argv = [
        ctx.kubectl,
        "scale",
        f"deployment/{params.deployment}",
        f"--namespace={params.namespace}",
        f"--current-replicas={current}",
        f"--replicas={target}",
    ]
    note = (
        f"deployment {params.namespace}/{params.deployment}: {current} replica(s) now, no autoscaler "
        f"owns it; {params.add:+d} -> {target} (kubectl refuses if the count changes meanwhile: "
        "read it again and rerun)"
    )
    title = f"Scale deployment {params.namespace}/{params.deployment} {current} -> {target}"
    result = kubectl_change(argv, title, ctx, ctx.timeout_seconds, [note])
    return result.model_copy(update={"data": {**result.data, "current": current, "target": target}})
