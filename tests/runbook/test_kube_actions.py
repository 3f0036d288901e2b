"""cordon_node, drain_node and scale_deployment against the fake Kubernetes API server, through the RBAC
`deploy render` emits.

The reads run in the dry run too; the change runs only when executed, and never when a read says it must
not. What a dry run prints as the API calls is what the execution sends (compared with the server's
record of the requests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from servescope.runbooks.actions import ACTIONS, StepResult
from servescope.runbooks.document import RunbookError, parse_runbook
from tests.runbook.fakes import step, write_runbook
from tests.runbook.kube_fakes import Cluster, autoscaler, budget, cluster, deployment, node, pod

pytestmark = pytest.mark.e2e  # a server on loopback


def run(kube: Cluster, name: str, execute: bool, **params: Any) -> StepResult:
    action = ACTIONS[name]
    return action.run(action.params.model_validate(params), kube.ctx(execute=execute, timeout_seconds=5))


def _sent(kube: Cluster) -> list[dict[str, Any]]:
    return [
        {"method": r["method"], "path": r["path"], "content_type": r["content_type"], "body": r["body"]}
        for r in kube.api.changes()
    ]


def test_cordon_prints_the_patch_and_sends_exactly_it_when_executed(tmp_path: Path) -> None:
    with cluster(tmp_path, node("gpu-node-07")) as kube:
        dry = run(kube, "cordon_node", False, node="gpu-node-07")
        assert dry.ok and dry.dry_run, dry.output
        assert "PATCH /api/v1/nodes/gpu-node-07 (application/strategic-merge-patch+json)" in dry.output
        assert '{"spec": {"unschedulable": true}}' in dry.output
        assert kube.api.changes() == []  # the dry run read the node, changed nothing
        done = run(kube, "cordon_node", True, node="gpu-node-07")
        assert done.ok, done.output
        assert _sent(kube) == dry.data["api_calls"]
        assert kube.api.store.get(("", "nodes"), None, "gpu-node-07")["spec"]["unschedulable"] is True


def test_scale_adds_to_the_current_count_with_the_read_version_as_precondition(tmp_path: Path) -> None:
    with cluster(tmp_path, deployment(4), autoscaler("other-hpa", "vllm-other")) as kube:
        dry = run(kube, "scale_deployment", False, namespace="serving", deployment="vllm", add=2)
        assert dry.ok and dry.dry_run, dry.output
        assert "4 replica(s) now" in dry.output and "+2 -> 6" in dry.output
        (call,) = dry.data["api_calls"]
        assert (
            call["method"] == "PATCH"
            and call["path"] == "/apis/apps/v1/namespaces/serving/deployments/vllm/scale"
        )
        assert call["body"]["spec"] == {"replicas": 6} and call["body"]["metadata"]["resourceVersion"]
        done = run(kube, "scale_deployment", True, namespace="serving", deployment="vllm", add=2)
        assert done.ok, done.output
        assert _sent(kube) == done.data["api_calls"]
        assert kube.api.store.get(("apps", "deployments"), "serving", "vllm")["spec"]["replicas"] == 6


def test_a_count_changed_meanwhile_makes_the_scale_fail_not_clobber(tmp_path: Path) -> None:
    with cluster(tmp_path, deployment(4)) as kube:
        store = kube.api.store
        original = store.patch

        def changed_meanwhile(key: Any, namespace: Any, name: str, body: dict[str, Any]) -> Any:
            if "spec" in body:  # someone else scaled it between our read and our patch
                original(key, namespace, name, {"spec": {"replicas": 5}})
            return original(key, namespace, name, body)

        store.patch = changed_meanwhile  # type: ignore[method-assign]
        done = run(kube, "scale_deployment", True, namespace="serving", deployment="vllm", add=2)
        store.patch = original  # type: ignore[method-assign]
        assert not done.ok and "changed since it was read" in done.output and "409" in done.output, (
            done.output
        )
        assert store.get(("apps", "deployments"), "serving", "vllm")["spec"]["replicas"] == 5


def test_an_autoscaled_deployment_is_left_alone(tmp_path: Path) -> None:
    with cluster(tmp_path, deployment(4), autoscaler("vllm-hpa", "vllm")) as kube:
        result = run(kube, "scale_deployment", True, namespace="serving", deployment="vllm", add=1)
        assert not result.ok and "HorizontalPodAutoscaler serving/vllm-hpa" in result.output
        assert kube.api.changes() == []


def test_decrease_and_zero_only_when_asked(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="allow_decrease"):
        ACTIONS["scale_deployment"].params.model_validate(
            {"namespace": "serving", "deployment": "vllm", "add": -1}
        )
    with cluster(tmp_path, deployment(1)) as kube:
        result = run(
            kube,
            "scale_deployment",
            True,
            namespace="serving",
            deployment="vllm",
            add=-1,
            allow_decrease=True,
        )
        assert not result.ok and "allow_zero" in result.output
        assert kube.api.changes() == []


@pytest.mark.parametrize("name", ["allow_decrease", "allow_zero"])
def test_the_scale_permissions_are_never_bound_from_labels(tmp_path: Path, name: str) -> None:
    body = f'namespace: serving\ndeployment: vllm\nadd: -1\n{name}: "{{{{ labels.x }}}}"'
    path = write_runbook(
        tmp_path, "ServescopeGpuLost", steps=step("scale", "change", "scale_deployment", body)
    )
    with pytest.raises(RunbookError, match="must be written literally"):
        parse_runbook(path)


def test_drain_evicts_through_the_api_and_reports_the_pod_a_budget_protects(tmp_path: Path) -> None:
    pods = [
        pod("vllm-a", labels={"app": "vllm"}),
        pod("vllm-b", labels={"app": "vllm"}),
        pod("cache-warm", labels={"app": "warm"}),  # no budget covers it
        pod("node-exporter", daemonset=True, labels={"app": "exporter"}),
        pod("kube-proxy-static", mirror=True, labels={"app": "proxy"}),
        pod("elsewhere", node_name="gpu-node-08", labels={"app": "other"}),
    ]
    guarded = budget("vllm-pdb", {"app": "vllm"}, minAvailable=1)  # one of the two may go, not both
    with cluster(tmp_path, node("gpu-node-07"), guarded, *pods) as kube:
        dry = run(kube, "drain_node", False, node="gpu-node-07", timeout="1s")
        assert dry.ok and dry.dry_run, dry.output
        assert "3 pod(s) to evict from gpu-node-07" in dry.output
        assert "serving/node-exporter (DaemonSet pod)" in dry.output and "mirror (static) pod" in dry.output
        assert (
            "PodDisruptionBudget serving/vllm-pdb allows 1 disruption(s) now and covers 2 pod(s)"
            in dry.output
        )
        assert kube.api.changes() == []
        done = run(kube, "drain_node", True, node="gpu-node-07", timeout="1s")
        sent = _sent(kube)
    assert not done.ok, done.output  # one pod stayed: the step says so
    assert done.data["not_evicted"] == {
        "serving/vllm-b": "blocked by a PodDisruptionBudget (HTTP 429 TooManyRequests: Cannot evict pod as "
        "it would violate the pod's disruption budget.)"
    }
    assert sorted(done.data["evicted"]) == ["serving/cache-warm", "serving/vllm-a"]
    assert sent == dry.data["api_calls"]  # exactly what the dry run printed, once each (no retry in 1s)
    assert "NOT evicted serving/vllm-b: blocked by a PodDisruptionBudget" in done.output


def test_drain_stops_on_an_emptydir_unless_asked(tmp_path: Path) -> None:
    with cluster(tmp_path, node("gpu-node-07"), pod("vllm-a", emptydir=True)) as kube:
        refused = run(kube, "drain_node", True, node="gpu-node-07")
        assert not refused.ok and "emptyDir" in refused.output and "Nothing was changed" in refused.output
        assert kube.api.changes() == []
        done = run(kube, "drain_node", True, node="gpu-node-07", delete_emptydir_data=True, timeout="1s")
        assert done.ok and "emptyDir data of serving/vllm-a is deleted" in done.output, done.output


def test_a_verb_the_role_lacks_is_the_api_servers_403_naming_it(tmp_path: Path) -> None:
    # No --serving-namespace: the rendered RBAC grants no scale in `serving`.
    with cluster(tmp_path, deployment(4), serving=()) as kube:
        result = run(kube, "scale_deployment", True, namespace="serving", deployment="vllm", add=1)
    assert not result.ok
    assert "HTTP 403 Forbidden" in result.output, result.output
    assert 'cannot list resource "horizontalpodautoscalers" in API group "autoscaling"' in result.output


def test_an_unreachable_api_server_is_a_failed_step_naming_it(tmp_path: Path) -> None:
    with cluster(tmp_path) as kube:
        url = kube.url
    ctx = kube.ctx(execute=False, timeout_seconds=2)
    action = ACTIONS["cordon_node"]
    result = action.run(action.params.model_validate({"node": "n1"}), ctx)
    assert not result.ok and f"cannot reach the API server at {url}" in result.output, result.output
