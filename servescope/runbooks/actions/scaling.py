"""`scale_deployment`: add (or, asked explicitly, remove) replicas relative to the current count.

The count is read from the Deployment's scale subresource, and the change is a patch of that
subresource carrying the resourceVersion it was read at: a change made meanwhile (by a person or a
controller) makes the API server refuse it (409 Conflict) instead of being overwritten. A Deployment
that a HorizontalPodAutoscaler or a KEDA ScaledObject owns is left alone: the autoscaler would undo the
change.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

from lightkube import Client
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.autoscaling_v2 import HorizontalPodAutoscaler
from lightkube.types import PatchType
from pydantic import Field, StrictBool, model_validator

from servescope.runbooks.actions.base import ActionError, RunContext, StepResult, action
from servescope.runbooks.actions.kube import MERGE, ApiCall, ApiRefusedError, api, dry_run, executed, named
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


ScaledObject = create_namespaced_resource("keda.sh", "v1alpha1", "ScaledObject", "scaledobjects")


def _hpas(namespace: str, client: Client) -> list[HorizontalPodAutoscaler]:
    return list(client.list(HorizontalPodAutoscaler, namespace=namespace))


def _scaled_objects(namespace: str, client: Client) -> list[Any]:
    return list(client.list(ScaledObject, namespace=namespace))


def _owners(ctx: RunContext, params: ScaleParams) -> list[str]:
    """The autoscalers whose target is this Deployment: HPAs, and KEDA ScaledObjects where KEDA is."""
    where = f"namespace {params.namespace}"
    hpas = api(
        ctx, f"listing the HorizontalPodAutoscalers of {where}", functools.partial(_hpas, params.namespace)
    )
    try:
        scaled = api(
            ctx, f"listing the ScaledObjects of {where}", functools.partial(_scaled_objects, params.namespace)
        )
    except ApiRefusedError as exc:
        if exc.code != 404:  # 404: KEDA is not installed here
            raise
        scaled = []
    owners = [
        f"HorizontalPodAutoscaler {named(h.metadata.namespace, h.metadata.name)}"
        for h in hpas
        if h.metadata is not None
        and h.spec.scaleTargetRef.kind == "Deployment"
        and h.spec.scaleTargetRef.name == params.deployment
    ]
    for item in scaled:
        target = (item.get("spec") or {}).get("scaleTargetRef") or {}
        if (target.get("kind") or "Deployment") == "Deployment" and target.get("name") == params.deployment:
            meta = item.metadata
            owners.append(f"KEDA ScaledObject {named(meta.namespace, meta.name)}")
    return owners


def _scale(params: ScaleParams, client: Client) -> Any:
    return client.get(Deployment.Scale, params.deployment, namespace=params.namespace)


def _current(ctx: RunContext, params: ScaleParams) -> tuple[int, str]:
    """The Deployment's replica count and the resourceVersion it was read at."""
    scale = api(
        ctx,
        f"reading the scale of deployment {params.namespace}/{params.deployment}",
        functools.partial(_scale, params),
    )
    replicas = scale.spec.replicas if scale.spec is not None and scale.spec.replicas is not None else 0
    return int(replicas), str(scale.metadata.resourceVersion or "")


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


def scale_call(params: ScaleParams, target: int, version: str) -> ApiCall:
    path = f"/apis/apps/v1/namespaces/{params.namespace}/deployments/{params.deployment}/scale"
    return ApiCall(
        "PATCH", path, {"metadata": {"resourceVersion": version}, "spec": {"replicas": target}}, MERGE
    )


def _patch(params: ScaleParams, body: Any, client: Client) -> None:
    client.patch(
        Deployment.Scale, params.deployment, body, namespace=params.namespace, patch_type=PatchType.MERGE
    )


@action("scale_deployment", "change", ScaleParams)
def scale_deployment(params: ScaleParams, ctx: RunContext) -> StepResult:
    """Add replicas to a Deployment, from its current count (a patch of its scale that fails if the count
    changed meanwhile)."""
    owners = _owners(ctx, params)
    what = f"deployment {params.namespace}/{params.deployment}"
    if owners:
        raise ActionError(
            f"{what} is scaled by {', '.join(owners)}: a change of its replicas would be undone by it; "
            "raise its minimum (minReplicas / minReplicaCount) instead. Nothing was changed."
        )
    current, version = _current(ctx, params)
    target = _target(params, current)
    call = scale_call(params, target, version)
    note = (
        f"{what}: {current} replica(s) now (resourceVersion {version}), no autoscaler owns it; "
        f"{params.add:+d} -> {target} (the API server refuses if the count changes meanwhile: rerun)"
    )
    title = f"Scale {what} {current} -> {target}"
    if not ctx.execute:
        return dry_run(title, [call], [note], current=current, target=target)
    try:
        api(ctx, f"scaling {what}", functools.partial(_patch, params, call.body or {}))
    except ApiRefusedError as exc:
        if exc.code != 409:
            raise
        raise ActionError(
            f"{what} changed since it was read ({exc.status}): nothing was changed; rerun"
        ) from None
    return executed(
        title, [call], [f"{what} scaled {current} -> {target}"], ok=True, current=current, target=target
    )
