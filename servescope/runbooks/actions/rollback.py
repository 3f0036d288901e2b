"""`rollback`: put a model's canary revision back on its stable one, through the Kubernetes API.

The canary alerts name `model_name`, `revision` (the canary) and `stable_revision`, and nothing about
the workload: the per-revision records are grouped by model and revision only. The step asks the API
server instead of trusting more labels: the ReplicaSets carrying the two revisions (in the service's
`--serving-namespace`s, or the step's `namespace`) name their controller, and the controller's own
state must agree that it rolls the canary out over the stable revision before anything is changed
(`rollback_find.py`, `rollback_plans.py`). A Deployment gets the stable ReplicaSet's template back (as
`kubectl rollout undo`); an Argo Rollout is aborted (as `kubectl argo rollouts abort`), and with
`undo: true` its template is set back too. Whatever does not add up is refused, saying why, with
nothing changed: the canary and the stable revision of two workloads (Flagger's canary and primary
Deployments: Flagger rolls back on its own), a stable ReplicaSet that is gone, a paused Deployment, a
rollout that moved on since the alert.

A dry run unless executed; the reads run in the dry run too, and it prints each API call as the
execution sends it.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import StrictBool, model_validator

from servescope.runbooks.actions.base import ActionError, RunContext, StepResult, action
from servescope.runbooks.actions.kube import ApiRefusedError, api, dry_run, executed
from servescope.runbooks.actions.params import K8sLabelValue, K8sName, LiteralOnly, ModelName, Params
from servescope.runbooks.actions.rollback_find import (
    CONTROLLERS,
    Found,
    Owner,
    ReplicaSetOf,
    find,
    namespaces,
)
from servescope.runbooks.actions.rollback_plans import Plan, Target, deployment_plan, rollout_plan

NOTHING = "Nothing was changed."


class RollbackParams(Params):
    model_name: ModelName
    revision: K8sLabelValue
    stable_revision: K8sLabelValue
    namespace: K8sName | None = None  # else the service's --serving-namespace(s)
    workload: K8sName | None = None  # the Deployment's or Rollout's name, where a revision names several
    undo: Annotated[StrictBool, LiteralOnly()] = False  # Argo Rollouts: also set the template back

    @model_validator(mode="after")
    def _two_revisions(self) -> RollbackParams:
        if self.revision == self.stable_revision:
            raise ValueError(f"revision and stable_revision are both {self.revision}: nothing to roll back")
        return self


def _owned(found: Found, revision: str, workload: str | None) -> dict[Owner, list[ReplicaSetOf]]:
    owned: dict[Owner, list[ReplicaSetOf]] = {}
    for rs in found.canary:
        owner = rs.owner
        if owner is None:
            raise ActionError(
                f"{rs.shown()} of revision {revision} has no controller to roll back. {NOTHING}"
            )
        if workload is None or owner.name == workload:
            owned.setdefault(owner, []).append(rs)
    if not owned:
        shown = "; ".join(rs.shown() for rs in found.canary)
        raise ActionError(f"revision {revision}'s ReplicaSets ({shown}) belong to no {workload}. {NOTHING}")
    if len(owned) > 1:
        shown = ", ".join(owner.shown() for owner in owned)
        raise ActionError(
            f"revision {revision} is rolled out by {len(owned)} workloads ({shown}): give the step "
            f"`namespace` or `workload` to say which. {NOTHING}"
        )
    return owned


def choose(found: Found, params: RollbackParams) -> Target:
    """The workload rolling the canary out, its ReplicaSets of the canary and of the stable revision."""
    ((owner, canary),) = _owned(found, params.revision, params.workload).items()
    if (owner.api_version, owner.kind) not in CONTROLLERS:
        raise ActionError(
            f"revision {params.revision} is rolled out by {owner.shown()} ({owner.api_version}): rollback "
            f"knows Deployments (apps/v1) and Argo Rollouts (argoproj.io/v1alpha1). {NOTHING}"
        )
    stable = [rs for rs in found.stable if rs.owner == owner]
    if stable:
        return Target(owner, canary, stable, params.revision, params.stable_revision)
    elsewhere = sorted({rs.owner.shown() for rs in found.stable if rs.owner is not None})
    if elsewhere:
        raise ActionError(
            f"the stable revision {params.stable_revision} is rolled out by {', '.join(elsewhere)}, the "
            f"canary by {owner.shown()}: two workloads, as Flagger's primary and canary are. Flagger rolls "
            "back on its own once its analysis fails `threshold` times; otherwise set the canary's traffic "
            f"weight to 0. {NOTHING}"
        )
    raise ActionError(
        f"the stable revision {params.stable_revision} has no ReplicaSet left beside {owner.shown()} (none "
        f"labelled {found.label}={params.stable_revision}: the revision history limit pruned it, or it was "
        "deleted): there is no template to go back to. Route the canary's users away (its weight to 0) "
        f"and redeploy the previous image. {NOTHING}"
    )


def _plan(params: RollbackParams, ctx: RunContext) -> tuple[Owner, Plan]:
    where = namespaces(ctx, params.namespace)
    target = choose(find(ctx, where, params.revision, params.stable_revision), params)
    if target.owner.kind == "Deployment":
        return target.owner, deployment_plan(ctx, target)
    return target.owner, rollout_plan(ctx, target, params.undo)


def _send(ctx: RunContext, owner: Owner, plan: Plan) -> tuple[list[str], bool]:
    """Each change in order; the first refused stops the rest. (what was done, whether all was)."""
    done: list[str] = []
    for change in plan.changes:
        try:
            api(ctx, f"{change.call.method} {change.call.path}", change.send)
        except ApiRefusedError as exc:
            why = str(exc)
            if exc.code == 422:
                why = f"{owner.shown()}'s spec changed since it was read ({exc.status}): rerun"
            return [*done, f"NOT done: {why}", *(["nothing was changed"] if not done else [])], False
        done.append(change.done)
    return done, True


@action("rollback", "change", RollbackParams)
def rollback(params: RollbackParams, ctx: RunContext) -> StepResult:
    """Roll a model's canary revision back to the stable one: abort its Argo Rollout (undo: true sets
    its template back too), or set its Deployment's template back to the stable ReplicaSet's."""
    title = f"Roll {params.model_name} back from revision {params.revision} to {params.stable_revision}"
    owner, plan = _plan(params, ctx)
    data: dict[str, Any] = {
        "workload": {"kind": owner.kind, "namespace": owner.namespace, "name": owner.name}
    }
    calls = [change.call for change in plan.changes]
    if not calls:
        return StepResult(ok=True, title=title, output="\n".join(plan.notes), data={**data, "api_calls": []})
    if not ctx.execute:
        return dry_run(title, calls, plan.notes, **data)
    lines, ok = _send(ctx, owner, plan)
    return executed(title, calls, [*plan.notes, *lines], ok=ok, **data)
