"""`rollback` of a Deployment's canary, against the fake Kubernetes API server through the RBAC that
`deploy render --serving-namespace serving` emits.

Ground truth: the stable revision's pod template (built here, independently of the step) must be the
Deployment's template after the execution, and the dry run must print exactly the calls the execution
sends (compared with the server's record of the requests). Every refusal changes nothing.

Rerun: .venv/bin/python -m pytest tests/runbook/test_rollback_deployment.py -q -n 0
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from servescope.runbooks.actions import ACTIONS
from servescope.runbooks.document import RunbookError, parse_runbook
from tests.runbook.fakes import step, write_runbook
from tests.runbook.kube_fakes import cluster
from tests.runbook.rollback_objects import (
    CANARY,
    CANARY_TEMPLATE,
    NAMESPACE,
    STABLE,
    STABLE_TEMPLATE,
    WORKLOAD,
    deployment,
    deployment_canary,
    pod_template,
    replica_set,
    run_rollback,
    sent,
    step_params,
)

pytestmark = pytest.mark.e2e  # a server on loopback
KEY = ("apps", "deployments")


def test_the_dry_run_prints_the_patch_the_execution_sends_and_the_stable_template_is_back(
    tmp_path: Path,
) -> None:
    with cluster(tmp_path, *deployment_canary()) as kube:
        dry = run_rollback(kube, execute=False)
        assert dry.ok and dry.dry_run, dry.output
        assert kube.api.changes() == []  # the dry run read, and changed nothing
        path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{WORKLOAD}"
        assert f"PATCH {path} (application/json-patch+json)" in dry.output
        assert f"ReplicaSet {NAMESPACE}/{WORKLOAD}-{STABLE} (revision 1, 3 pod(s))" in dry.output
        assert dry.data["api_calls"] == [
            {
                "method": "PATCH",
                "path": path,
                "content_type": "application/json-patch+json",
                "body": [
                    {"op": "test", "path": "/metadata/generation", "value": 7},
                    {"op": "replace", "path": "/spec/template", "value": STABLE_TEMPLATE},
                ],
            }
        ]
        reads = [r["query"] for r in kube.api.requests if r["path"].endswith("/replicasets")]
        assert reads[-1] == f"labelSelector=pod-template-hash+in+%28{CANARY}%2C{STABLE}%29", reads
        done = run_rollback(kube, execute=True)
        assert done.ok and not done.dry_run, done.output
        assert sent(kube) == dry.data["api_calls"]
        after = kube.api.store.get(KEY, NAMESPACE, WORKLOAD)
        print("Deployment template after the rollback:", after["spec"]["template"])
        assert after["spec"]["template"] == STABLE_TEMPLATE  # the stable revision's, whole
        assert after["metadata"]["generation"] == 8 and after["spec"]["replicas"] == 4
        again = run_rollback(kube, execute=True)  # the rollback is done: nothing left to do
        assert again.ok and "already: nothing to do" in again.output and len(kube.api.changes()) == 1


def test_the_stable_replicaset_gone_is_refused_clearly(tmp_path: Path) -> None:
    objects = [deployment(CANARY_TEMPLATE), replica_set(CANARY_TEMPLATE, CANARY, 2, 4)]
    with cluster(tmp_path, *objects) as kube:
        result = run_rollback(kube, execute=True)
        assert not result.ok
        assert f"the stable revision {STABLE} has no ReplicaSet left" in result.output, result.output
        assert "Nothing was changed" in result.output and kube.api.changes() == []


def test_two_workloads_as_flaggers_primary_and_canary_are_refused(tmp_path: Path) -> None:
    objects = [
        deployment(CANARY_TEMPLATE),
        deployment(STABLE_TEMPLATE, name=f"{WORKLOAD}-primary"),
        replica_set(CANARY_TEMPLATE, CANARY, 2, 1),
        replica_set(STABLE_TEMPLATE, STABLE, 1, 4, owner=f"{WORKLOAD}-primary"),
    ]
    with cluster(tmp_path, *objects) as kube:
        result = run_rollback(kube, execute=True)
    assert not result.ok and "two workloads, as Flagger's primary and canary are" in result.output
    assert f"Deployment {NAMESPACE}/{WORKLOAD}-primary" in result.output and kube.api.changes() == []


def test_a_paused_deployment_is_refused_as_kubectl_refuses_it(tmp_path: Path) -> None:
    with cluster(tmp_path, *deployment_canary(paused=True)) as kube:
        result = run_rollback(kube, execute=True)
    assert not result.ok and "is paused" in result.output and "kubectl rollout resume" in result.output
    assert kube.api.changes() == []


def test_a_template_changed_since_the_alert_is_refused(tmp_path: Path) -> None:
    objects = deployment_canary()
    objects[0]["spec"]["template"] = pod_template("v0.6.5", 512)  # a third revision went out meanwhile
    with cluster(tmp_path, *objects) as kube:
        result = run_rollback(kube, execute=True)
    assert not result.ok and "changed since the alert" in result.output and kube.api.changes() == []


def test_a_spec_changed_between_read_and_patch_is_refused_by_the_api_server(tmp_path: Path) -> None:
    with cluster(tmp_path, *deployment_canary()) as kube:
        store = kube.api.store
        original = store.json_patch
        someone_else = pod_template("v0.6.5", 128)

        def changed_meanwhile(key: Any, namespace: Any, name: str, operations: Any) -> Any:
            store.patch(key, namespace, name, {"spec": {"template": someone_else}})
            return original(key, namespace, name, operations)

        store.json_patch = changed_meanwhile  # type: ignore[method-assign]
        result = run_rollback(kube, execute=True)
        store.json_patch = original  # type: ignore[method-assign]
        assert not result.ok and "spec changed since it was read" in result.output, result.output
        assert "HTTP 422" in result.output and "nothing was changed" in result.output
        assert store.get(KEY, NAMESPACE, WORKLOAD)["spec"]["template"] == someone_else


def test_the_revision_found_by_a_version_label_goes_back_to_the_replicaset_with_pods(tmp_path: Path) -> None:
    older = pod_template("v0.6.3", 128)  # the same version with other flags, scaled down long ago
    objects = [*deployment_canary(), replica_set(older, "5c9d8e7f6a", 0, 0)]
    with cluster(tmp_path, *objects) as kube:
        result = run_rollback(kube, execute=True, revision="v0.6.4", stable_revision="v0.6.3")
        assert result.ok, result.output
        template = kube.api.store.get(KEY, NAMESPACE, WORKLOAD)["spec"]["template"]
    assert template == STABLE_TEMPLATE


def test_a_revision_in_two_namespaces_needs_the_step_to_say_which(tmp_path: Path) -> None:
    elsewhere = deployment_canary()
    for obj in elsewhere:
        obj["metadata"]["namespace"] = "staging"
    with cluster(tmp_path, *deployment_canary(), *elsewhere, serving=("serving", "staging")) as kube:
        both = run_rollback(kube, execute=True, namespaces=("serving", "staging"))
        assert not both.ok and "rolled out by 2 workloads" in both.output and kube.api.changes() == []
        one = run_rollback(kube, execute=True, namespaces=("serving", "staging"), namespace="staging")
        assert one.ok, one.output
        assert [r["path"] for r in kube.api.changes()] == [
            f"/apis/apps/v1/namespaces/staging/deployments/{WORKLOAD}"
        ]


def test_without_a_namespace_to_look_in_it_says_so_and_asks_nothing(tmp_path: Path) -> None:
    with cluster(tmp_path, *deployment_canary()) as kube:
        result = run_rollback(kube, execute=True, namespaces=())
        assert not result.ok and "--serving-namespace" in result.output and kube.api.requests == []


def test_a_role_without_the_verb_is_the_api_servers_403_naming_it(tmp_path: Path) -> None:
    with cluster(tmp_path, *deployment_canary(), serving=()) as kube:  # no Role in `serving`
        result = run_rollback(kube, execute=True)
    assert not result.ok and "HTTP 403 Forbidden" in result.output, result.output
    assert 'cannot list resource "replicasets" in API group "apps"' in result.output


def test_the_parameters_are_checked_before_anything_is_read() -> None:
    params = ACTIONS["rollback"].params
    with pytest.raises(ValidationError, match="both 6d4cf56db9"):
        params.model_validate(step_params(stable_revision=CANARY))
    with pytest.raises(ValidationError, match="Kubernetes label value"):
        params.model_validate(step_params(revision="a,b)"))  # never a label selector of its own
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        params.model_validate(step_params(deployment=WORKLOAD))


def test_undo_is_never_bound_from_a_label(tmp_path: Path) -> None:
    body = 'model_name: m\nrevision: a\nstable_revision: b\nundo: "{{ labels.undo }}"'
    path = write_runbook(tmp_path, "ServescopeGpuLost", steps=step("rollback", "change", "rollback", body))
    with pytest.raises(RunbookError, match="must be written literally"):
        parse_runbook(path)
