"""The DaemonSet reaches every GPU node, and leaves one when the GPU Operator says so: its tolerations and
node affinity judged against nodes as real clusters label and taint them, with Kubernetes' own matching
rules (a taint is tolerated by a toleration of its key, value and effect; the affinity's terms are ORed,
their requirements ANDed; NotIn and DoesNotExist hold for a missing label)."""

from __future__ import annotations

from typing import Any

import pytest

from servescope.deploy.exporter import daemonset
from servescope.deploy.options import DeployOptions
from tests.deploy.manifests import VARIANTS, container, pod_spec
from tests.deploy.test_cli import render

Node = tuple[dict[str, str], list[dict[str, str]]]  # labels, taints
GPU = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H200"}
NODES: dict[str, Node] = {
    "gke gpu pool": (GPU, [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
    "eks gpu node": (GPU, [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]),
    "aks gpu pool": (GPU, [{"key": "sku", "value": "gpu", "effect": "NoSchedule"}]),
    "gpu node, evicting taint": (GPU, [{"key": "nvidia.com/gpu", "effect": "NoExecute"}]),
    "operator says run": ({**GPU, "nvidia.com/gpu.deploy.servescope": "true"}, []),
    "mig change under way": ({**GPU, "nvidia.com/gpu.deploy.servescope": "paused-for-mig-change"}, []),
    "operator says no": ({**GPU, "nvidia.com/gpu.deploy.servescope": "false"}, []),
    "cpu node": ({"kubernetes.io/os": "linux"}, []),
    "gpu node, other taint": (GPU, [{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}]),
}


def tolerated(taint: dict[str, str], tolerations: list[dict[str, Any]]) -> bool:
    for t in tolerations:
        key_ok = not t.get("key") or t["key"] == taint["key"]
        value_ok = t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", "")
        effect_ok = not t.get("effect") or t["effect"] == taint["effect"]
        if key_ok and value_ok and effect_ok:
            return True
    return False


def holds(requirement: dict[str, Any], labels: dict[str, str]) -> bool:
    key, operator, values = requirement["key"], requirement["operator"], requirement.get("values", [])
    present = key in labels
    return {
        "In": present and labels.get(key) in values,
        "NotIn": not present or labels[key] not in values,
        "Exists": present,
        "DoesNotExist": not present,
        "Gt": present and labels[key].isdigit() and int(labels[key]) > int(values[0]),
        "Lt": present and labels[key].isdigit() and int(labels[key]) < int(values[0]),
    }[operator]


def schedules(spec: dict[str, Any], node: Node) -> bool:
    labels, taints = node
    if any(labels.get(k) != v for k, v in spec.get("nodeSelector", {}).items()):
        return False
    if not all(tolerated(taint, spec.get("tolerations", [])) for taint in taints):
        return False
    required = (
        spec.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    if required is None:
        return True
    return any(
        all(holds(r, labels) for r in term["matchExpressions"]) for term in required["nodeSelectorTerms"]
    )


def landing(options: DeployOptions) -> set[str]:
    spec = pod_spec(daemonset(options))
    return {name for name, node in NODES.items() if schedules(spec, node)}


def test_the_defaults_reach_every_gpu_node_the_operator_does_not_take_away() -> None:
    assert landing(DeployOptions()) == {
        "gke gpu pool",
        "eks gpu node",
        "aks gpu pool",
        "gpu node, evicting taint",
        "operator says run",
    }


def test_the_options_move_it_as_asked() -> None:
    every_taint = DeployOptions(tolerations=["*"], gpu_deploy_label="")
    assert landing(every_taint) == set(NODES) - {"cpu node"}
    h100_only = DeployOptions(node_affinity=["nvidia.com/gpu.product In NVIDIA-H100-80GB-HBM3"])
    assert landing(h100_only) == set()
    own_taint = DeployOptions(tolerations=["dedicated=inference:NoSchedule"])
    assert landing(own_taint) == {"gpu node, other taint", "operator says run"}


def test_the_operator_s_label_is_anded_with_the_affinity_asked_for() -> None:
    spec = pod_spec(daemonset(VARIANTS["gpu-operator"]))
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    label = "nvidia.com/gpu.deploy.dcgm-exporter"
    assert [term["matchExpressions"][-1] for term in terms] == [
        {"key": label, "operator": "In", "values": ["true"]},
        {"key": label, "operator": "DoesNotExist"},
    ]
    for term in terms:
        assert term["matchExpressions"][:2] == [
            {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H200", "NVIDIA-B200"]},
            {"key": "example.com/pool", "operator": "NotIn", "values": ["cpu"]},
        ]
    assert "affinity" not in pod_spec(daemonset(DeployOptions(gpu_deploy_label="")))


def test_kubelet_root_and_apparmor_profile() -> None:
    spec = pod_spec(daemonset(VARIANTS["gpu-operator"]))
    [volume] = [v for v in spec["volumes"] if v["name"] == "pod-resources"]
    assert volume["hostPath"]["path"] == "/var/lib/k0s/kubelet/pod-resources"
    security = container(daemonset(VARIANTS["gpu-operator"]))["securityContext"]
    assert security["appArmorProfile"] == {"type": "Localhost", "localhostProfile": "servescope-exporter"}
    default = container(daemonset(DeployOptions()))["securityContext"]
    assert default["appArmorProfile"] == {"type": "Unconfined"}  # discovery reads other pods' /proc
    assert pod_spec(daemonset(DeployOptions()))["securityContext"]["seccompProfile"] == {
        "type": "RuntimeDefault"
    }
    podmonitor = container(daemonset(DeployOptions(topology="podmonitor")))["securityContext"]
    assert "appArmorProfile" not in podmonitor  # reads no other process: the runtime's default stays


# What a bad value of each placement flag is told, by flag and value.
REFUSED = {
    "--toleration": {"nvidia.com/gpu:Sometimes": "effect", "bad key": "label key"},
    "--node-affinity": {
        "nvidia.com/gpu.product Like H200": "OPERATOR",
        "nvidia.com/gpu.product In": "needs values",
        "nvidia.com/gpu.count Gt many": "one integer",
    },
    "--gpu-deploy-label": {"not a label": "label key"},
    "--kubelet-root": {"var/lib/kubelet": "absolute", "/var/lib/../kubelet": "absolute"},
    "--apparmor-profile": {"complain": "unconfined"},
}


@pytest.mark.parametrize(
    ("flag", "value"), [(flag, value) for flag, values in REFUSED.items() for value in values]
)
def test_bad_placement_values_are_refused_naming_the_flag(flag: str, value: str) -> None:
    result = render(flag, value)
    says = REFUSED[flag][value]
    assert result.exit_code == 2 and flag in result.stderr and says in result.stderr, result.output
