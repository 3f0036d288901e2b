"""scale_deployment and drain_node against a fake kubectl on PATH that answers from a cluster state file.

The reads (deployment, autoscalers, pods, budgets) run in the dry run too; the change runs only when
executed, and never when a read says it must not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from servescope.runbooks.actions import ACTIONS, RunContext, StepResult
from servescope.runbooks.document import RunbookError, parse_runbook
from tests.runbook.fakes import recorded, step, write_runbook
from tests.runbook.fakes import run as run_action
from tests.runbook.kube_fakes import autoscaler, budget, deployment, fake_cluster_kubectl, listing, pod

pytestmark = pytest.mark.e2e
DEPLOYMENT_GET = ["get", "deployment/vllm", "--namespace=serving", "--output=json"]
HPA_GET = ["get", "horizontalpodautoscalers.autoscaling", "--namespace=serving", "--output=json"]
KEDA_GET = ["get", "scaledobjects.keda.sh", "--namespace=serving", "--output=json"]
PODS_GET = ["get", "pods", "--all-namespaces", "--field-selector=spec.nodeName=gpu-node-07", "--output=json"]
PDB_GET = ["get", "poddisruptionbudgets.policy", "--namespace=serving", "--output=json"]


def run(name: str, execute: bool, **params: Any) -> StepResult:
    return run_action(name, RunContext(execute=execute), **params)


def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **state: Any) -> Path:
    """A fake kubectl over `state`, first on PATH (the context's default `kubectl`); its argv marker."""
    program, marker, _ = fake_cluster_kubectl(tmp_path, state)
    monkeypatch.setenv("PATH", f"{program.parent}:{Path('/usr/bin')}")
    return marker


def scalable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replicas: int, hpas: dict[str, Any], **state: Any
) -> Path:
    """A cluster with the Deployment serving/vllm at `replicas` and the HPA list `hpas`, without KEDA."""
    return cluster(
        tmp_path,
        monkeypatch,
        **{"deployment/vllm": deployment(replicas), "horizontalpodautoscalers.autoscaling": hpas, **state},
    )


def test_scale_adds_to_the_current_count_and_passes_it_as_the_precondition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = scalable(tmp_path, monkeypatch, 4, listing(autoscaler("other-hpa", "vllm-other")))
    scale = ["scale", "deployment/vllm", "--namespace=serving", "--current-replicas=4", "--replicas=6"]
    dry = run("scale_deployment", False, namespace="serving", deployment="vllm", add=2)
    assert dry.ok and dry.dry_run and dry.command == ["kubectl", *scale], dry.output
    assert "4 replica(s) now, no autoscaler owns it; +2 -> 6" in dry.output
    # no KEDA in this cluster: its missing resource type is no error
    assert recorded(marker) == [HPA_GET, KEDA_GET, DEPLOYMENT_GET]
    done = run("scale_deployment", True, namespace="serving", deployment="vllm", add=2)
    assert done.ok and not done.dry_run and done.data["target"] == 6, done.output
    assert recorded(marker)[-1] == scale and "deployment.apps/vllm scaled" in done.output


def test_a_count_changed_meanwhile_makes_the_scale_fail_not_clobber(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = scalable(tmp_path, monkeypatch, 4, listing(), replicas_now=9)
    done = run("scale_deployment", True, namespace="serving", deployment="vllm", add=1)
    assert not done.ok and "Expected replicas to be 4, was 9" in done.output and "exited 1" in done.output
    assert "--current-replicas=4" in recorded(marker)[-1]


@pytest.mark.parametrize(
    ("state", "owner"),
    [
        (
            {"horizontalpodautoscalers.autoscaling": listing(autoscaler("vllm-hpa", "vllm"))},
            "HorizontalPodAutoscaler serving/vllm-hpa",
        ),
        (
            {
                "horizontalpodautoscalers.autoscaling": listing(),
                "scaledobjects.keda.sh": listing(autoscaler("vllm-keda", "vllm")),
            },
            "KEDA ScaledObject serving/vllm-keda",
        ),
    ],
)
def test_an_autoscaled_deployment_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: dict[str, Any], owner: str
) -> None:
    marker = cluster(tmp_path, monkeypatch, **{"deployment/vllm": deployment(4), **state})
    for execute in (False, True):
        result = run("scale_deployment", execute, namespace="serving", deployment="vllm", add=2)
        assert not result.ok and f"is scaled by {owner}" in result.output, result.output
        assert "Nothing was changed" in result.output
    assert not any(argv[0] == "scale" for argv in recorded(marker))


def test_decrease_and_zero_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    params = {"namespace": "serving", "deployment": "vllm"}
    with pytest.raises(ValidationError, match="write allow_decrease: true to mean it"):
        ACTIONS["scale_deployment"].params.model_validate({**params, "add": -1})
    with pytest.raises(ValidationError, match="add: 0 changes nothing"):
        ACTIONS["scale_deployment"].params.model_validate({**params, "add": 0})
    with pytest.raises(ValidationError):  # labels bind strings: "true" is no boolean here
        ACTIONS["scale_deployment"].params.model_validate({**params, "add": -1, "allow_decrease": "true"})
    marker = scalable(tmp_path, monkeypatch, 2, listing())
    fewer = run("scale_deployment", True, **params, add=-1, allow_decrease=True)
    assert fewer.ok and recorded(marker)[-1][-1] == "--replicas=1", fewer.output
    zero = run("scale_deployment", True, **params, add=-2, allow_decrease=True)
    assert not zero.ok and "would scale it to 0 (the model stops serving)" in zero.output
    below = run("scale_deployment", True, **params, add=-3, allow_decrease=True, allow_zero=True)
    assert not below.ok and "would leave -1" in below.output
    assert sum(argv[0] == "scale" for argv in recorded(marker)) == 1
    stopped = run("scale_deployment", True, **params, add=-2, allow_decrease=True, allow_zero=True)
    assert stopped.ok and recorded(marker)[-1][-1] == "--replicas=0"


@pytest.mark.parametrize("name", ["allow_decrease", "allow_zero"])
def test_the_scale_permissions_are_never_bound_from_labels(tmp_path: Path, name: str) -> None:
    params = f'namespace: serving\ndeployment: vllm\nadd: -1\n{name}: "{{{{ labels.x }}}}"'
    path = write_runbook(tmp_path, steps=step("scale", "change", "scale_deployment", params))
    with pytest.raises(RunbookError, match="must be written literally, not bound from a label"):
        parse_runbook(path)


def test_drain_checks_pods_and_budgets_in_the_dry_run_and_keeps_emptydirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pods = listing(pod("vllm-a", gpus=4), pod("vllm-b", gpus=4), pod("dcgm-exporter", daemonset=True))
    marker = cluster(tmp_path, monkeypatch, pods=pods, **{"poddisruptionbudgets.policy": listing(budget(1))})
    drain = ["drain", "gpu-node-07", "--ignore-daemonsets", "--timeout=300s"]
    dry = run("drain_node", False, node="gpu-node-07", timeout="5m")
    assert dry.ok and dry.dry_run and dry.command == ["kubectl", *drain], dry.output
    assert recorded(marker) == [PODS_GET, PDB_GET]
    assert "2 pod(s) to evict from gpu-node-07, requesting 8 GPU(s)" in dry.output
    assert "PodDisruptionBudget serving/vllm-pdb allows 1 disruption(s) now and covers 2 pod(s)" in dry.output
    done = run("drain_node", True, node="gpu-node-07", timeout="5m")
    assert done.ok and recorded(marker)[-1] == drain and "node/gpu-node-07 drained" in done.output


def test_drain_stops_on_an_emptydir_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pods = listing(pod("vllm-a", emptydir=True), pod("vllm-b"))
    marker = cluster(tmp_path, monkeypatch, pods=pods, **{"poddisruptionbudgets.policy": listing()})
    for execute in (False, True):
        stopped = run("drain_node", execute, node="gpu-node-07")
        assert (
            not stopped.ok and "keep emptyDir volumes (often a model cache): serving/vllm-a" in stopped.output
        )
    assert not any(argv[0] == "drain" for argv in recorded(marker))
    done = run("drain_node", True, node="gpu-node-07", delete_emptydir_data=True)
    assert done.ok and "--delete-emptydir-data" in recorded(marker)[-1], done.output
    assert "emptyDir data of serving/vllm-a is deleted" in done.output


@pytest.mark.parametrize(
    "selector",
    [
        {"matchLabels": {"app": "vllm"}},
        {},
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["vllm"]}]},
    ],
)
def test_drain_stops_on_a_budget_that_allows_no_disruption(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, selector: dict[str, Any]
) -> None:
    pods = listing(pod("vllm-a"))
    budgets = listing(budget(0, selector), budget(0, {"matchLabels": {"app": "other"}}))
    marker = cluster(tmp_path, monkeypatch, pods=pods, **{"poddisruptionbudgets.policy": budgets})
    result = run("drain_node", True, node="gpu-node-07")
    assert not result.ok, result.output
    assert "allows 0 disruption(s) now and covers 1 pod(s) here (serving/vllm-a)" in result.output
    assert "the drain would wait until its timeout" in result.output and result.output.count("vllm-pdb") == 1
    assert not any(argv[0] == "drain" for argv in recorded(marker))


def test_a_failed_read_is_a_failed_step_naming_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = cluster(tmp_path, monkeypatch)  # no pods type at all: kubectl's error
    result = run("drain_node", True, node="gpu-node-07")
    assert not result.ok and "kubectl get pods --all-namespaces" in result.output
    assert "doesn't have a resource type" in result.output
    assert recorded(marker) == [PODS_GET]
