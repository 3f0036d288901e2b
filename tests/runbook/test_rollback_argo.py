"""`rollback` of an Argo Rollout's canary, against the fake Kubernetes API server through the rendered RBAC.

What `kubectl argo rollouts abort` sends is a merge patch `{"status": {"abort": true}}` of the Rollout's
`status` subresource; `undo` replaces `spec.template` with the stable ReplicaSet's template without
`rollouts-pod-template-hash` (argoproj/argo-rollouts, pkg/kubectl-argo-rollouts/cmd/abort and /undo).
The Rollout's own status must agree with the alert before anything is sent.

Rerun: .venv/bin/python -m pytest tests/runbook/test_rollback_argo.py -q -n 0
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.runbook import rollback_objects as canary
from tests.runbook.kube_fakes import cluster, rendered
from tests.support.kube import Rbac

pytestmark = pytest.mark.e2e  # a server on loopback
KEY = ("argoproj.io", "rollouts")
BASE = f"/apis/argoproj.io/v1alpha1/namespaces/{canary.NAMESPACE}/rollouts/{canary.WORKLOAD}"
ABORT = {
    "method": "PATCH",
    "path": f"{BASE}/status",
    "content_type": "application/merge-patch+json",
    "body": {"status": {"abort": True}},
}


def test_abort_patches_the_status_subresource_and_leaves_the_spec_as_git_says(tmp_path: Path) -> None:
    with cluster(tmp_path, *canary.argo_canary()) as kube:
        dry = canary.run_rollback(kube, execute=False)
        assert dry.ok and dry.dry_run and dry.data["api_calls"] == [ABORT], dry.output
        assert "which agrees (status.currentPodHash 6d4cf56db9, status.stableRS 7f8b9c0d1e)" in dry.output
        assert kube.api.changes() == []
        done = canary.run_rollback(kube, execute=True)
        assert done.ok, done.output
        assert canary.sent(kube) == dry.data["api_calls"]
        after = kube.api.store.get(KEY, canary.NAMESPACE, canary.WORKLOAD)
        assert after["status"]["abort"] is True
        assert after["spec"]["template"] == canary.CANARY_TEMPLATE and after["metadata"]["generation"] == 3
        again = canary.run_rollback(kube, execute=True)
        assert again.ok and "aborted already" in again.output and len(kube.api.changes()) == 1


def test_abort_and_undo_put_the_stable_template_back(tmp_path: Path) -> None:
    with cluster(tmp_path, *canary.argo_canary()) as kube:
        dry = canary.run_rollback(kube, execute=False, undo=True)
        undo = {
            "method": "PATCH",
            "path": BASE,
            "content_type": "application/json-patch+json",
            "body": [
                {"op": "test", "path": "/metadata/generation", "value": 3},
                {"op": "replace", "path": "/spec/template", "value": canary.STABLE_TEMPLATE},
            ],
        }
        assert dry.ok and dry.data["api_calls"] == [ABORT, undo], dry.output
        done = canary.run_rollback(kube, execute=True, undo=True)
        assert done.ok, done.output
        assert canary.sent(kube) == [ABORT, undo]  # in this order: traffic back first, then the template
        after = kube.api.store.get(KEY, canary.NAMESPACE, canary.WORKLOAD)
        print("Rollout after abort and undo:", after["status"], after["spec"]["template"])
        assert after["spec"]["template"] == canary.STABLE_TEMPLATE and after["status"]["abort"] is True
        assert after["metadata"]["generation"] == 4  # one spec change: the undo (the abort is status)


def test_a_rollout_that_moved_on_since_the_alert_is_refused(tmp_path: Path) -> None:
    objects = canary.argo_canary()
    # Its stable ReplicaSet is another one than the alert's.
    objects[0] = canary.rollout(canary.CANARY, "0a1b2c3d4e")
    with cluster(tmp_path, *objects) as kube:
        result = canary.run_rollback(kube, execute=True)
    assert not result.ok and "it moved on since" in result.output and kube.api.changes() == []


def test_a_rollout_back_on_its_stable_replicaset_needs_nothing(tmp_path: Path) -> None:
    objects = canary.argo_canary()
    objects[0] = canary.rollout(canary.STABLE, canary.STABLE)
    with cluster(tmp_path, *objects) as kube:
        result = canary.run_rollback(kube, execute=True, undo=True)
    assert result.ok and "already: nothing to do" in result.output and kube.api.changes() == []


def test_a_workload_ref_rollout_is_aborted_but_not_undone(tmp_path: Path) -> None:
    objects = canary.argo_canary()
    objects[0]["spec"]["workloadRef"] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": canary.WORKLOAD,
    }
    with cluster(tmp_path, *objects) as kube:
        refused = canary.run_rollback(kube, execute=True, undo=True)
        assert not refused.ok and "spec.workloadRef" in refused.output and kube.api.changes() == []
        assert canary.run_rollback(kube, execute=True).ok


def test_the_stable_replicaset_gone_is_refused(tmp_path: Path) -> None:
    objects = [
        canary.rollout(canary.CANARY, canary.STABLE),
        canary.replica_set(canary.CANARY_TEMPLATE, canary.CANARY, 2, 1, argo=True),
    ]
    with cluster(tmp_path, *objects) as kube:
        result = canary.run_rollback(kube, execute=True)
    assert not result.ok and f"the stable revision {canary.STABLE} has no ReplicaSet left" in result.output


def _without(rbac_yaml: str, resource: str) -> Rbac:
    """The rendered RBAC with the Roles' rule for `resource` taken out."""
    documents = [doc for doc in yaml.safe_load_all(rbac_yaml) if isinstance(doc, dict)]
    for doc in documents:
        if doc.get("kind") == "Role":
            doc["rules"] = [rule for rule in doc["rules"] if resource not in rule["resources"]]
    return Rbac.from_documents(documents)


def test_a_role_without_the_abort_verb_is_refused_by_the_api_server(tmp_path: Path) -> None:
    with cluster(tmp_path, *canary.argo_canary()) as kube:
        kube.api.rbac = _without(rendered("serving"), "rollouts/status")
        result = canary.run_rollback(kube, execute=True)
        after = kube.api.store.get(KEY, canary.NAMESPACE, canary.WORKLOAD)
    assert not result.ok and "HTTP 403 Forbidden" in result.output, result.output
    assert 'cannot patch resource "rollouts/status" in API group "argoproj.io"' in result.output
    assert "abort" not in after["status"] and [r["status"] for r in kube.api.changes()] == [403]
