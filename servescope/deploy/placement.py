"""Where the exporter's pods land and what they may do there: tolerations, node affinity, the GPU
Operator's deploy label, the kubelet's root and the AppArmor profile; each a `deploy render` flag.

A DaemonSet that misses a GPU node leaves every GPU alert of that node blind, so the defaults tolerate
the taints GPU node pools carry (`nvidia.com/gpu` with any effect, AKS's `sku=gpu`), and the GPU
Operator's deploy label lets the Operator's MIG manager and driver upgrades take the exporter off a
node, as they do with its own operands, while an absent label still schedules it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator

from servescope.core.settings_cli import repeated, setting
from servescope.deploy.checks import absolute_path, label_key
from servescope.deploy.cluster import ClusterOptions
from servescope.deploy.names import GPU_RESOURCE

# The Operator's convention: nvidia.com/gpu.deploy.<operand>; "true" or absent runs it, "false",
# "paused-for-mig-change" or "paused-for-driver-upgrade" takes it off the node.
GPU_DEPLOY_LABEL = "nvidia.com/gpu.deploy.servescope"
KUBELET_ROOT = "/var/lib/kubelet"
DEFAULT_TOLERATIONS = (GPU_RESOURCE, "sku=gpu")
_TOLERATION = re.compile(r"^(?P<key>[^=:]+)(?:=(?P<value>[^:]*))?(?::(?P<effect>[A-Za-z]+))?$")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_APPARMOR = re.compile(r"^(unconfined|runtime-default|localhost/[A-Za-z0-9._-]+)$")


def toleration(text: str) -> dict[str, Any]:
    """`*` (every taint), `KEY` (any value), `KEY=VALUE`, each optionally `:EFFECT` (else every effect)."""
    if text.strip() == "*":
        return {"operator": "Exists"}
    found = _TOLERATION.match(text.strip())
    if found is None:
        raise ValueError(f"{text!r} is not KEY[=VALUE][:EFFECT] or *")
    key, value, effect = found["key"].strip(), found["value"], found["effect"]
    label_key(key)
    if effect is not None and effect not in _EFFECTS:
        raise ValueError(f"{text!r}: effect {effect!r} is not one of {', '.join(_EFFECTS)}")
    rule: dict[str, Any] = {"key": key, "operator": "Exists" if value is None else "Equal"}
    if value is not None:
        rule["value"] = value
    if effect is not None:
        rule["effect"] = effect
    return rule


def requirement(text: str) -> dict[str, Any]:
    """A node selector requirement from `KEY In a,b`, `KEY NotIn a`, `KEY Exists`, `KEY Gt 3` and alike."""
    parts = text.split()
    if len(parts) not in (2, 3) or parts[1] not in _OPERATORS:
        raise ValueError(
            f"{text!r} is not `KEY OPERATOR [VALUES]` with an operator of {', '.join(_OPERATORS)}"
        )
    key, operator = parts[0], parts[1]
    label_key(key)
    values = parts[2].split(",") if len(parts) == 3 else []
    if operator in ("Exists", "DoesNotExist") and values:
        raise ValueError(f"{text!r}: {operator} takes no values")
    if operator not in ("Exists", "DoesNotExist") and not values:
        raise ValueError(f"{text!r}: {operator} needs values, comma-separated")
    if operator in ("Gt", "Lt") and (len(values) != 1 or not values[0].isdigit()):
        raise ValueError(f"{text!r}: {operator} takes one integer")
    return {"key": key, "operator": operator, **({"values": values} if values else {})}


def _each(check: Any) -> Any:
    def checked(items: list[str]) -> list[str]:
        for item in items:
            check(item)
        return items

    return AfterValidator(checked)


def _apparmor(value: str) -> str:
    if not _APPARMOR.match(value):
        raise ValueError(f"{value!r} is not unconfined, runtime-default or localhost/<profile>")
    return value


class PlacementOptions(ClusterOptions):
    """The exporter's nodes and its rights on them."""

    tolerations: Annotated[list[str], _each(toleration)] = repeated(
        lambda: list(DEFAULT_TOLERATIONS),
        "--toleration",
        "Taint the exporter tolerates, KEY[=VALUE][:EFFECT] (no value: any; no effect: every one; `*`: "
        "every taint). Repeatable; the default tolerates nvidia.com/gpu and sku=gpu (AKS). The DaemonSet "
        "controller adds the node.kubernetes.io/* ones itself.",
    )
    node_affinity: Annotated[list[str], _each(requirement)] = repeated(
        list,
        "--node-affinity",
        "Node requirement `KEY OPERATOR [VALUES]` (In, NotIn, Exists, DoesNotExist, Gt, Lt; values "
        "comma-separated), e.g. `nvidia.com/gpu.product In NVIDIA-H200,NVIDIA-H100-80GB-HBM3`. "
        "Repeatable; all must hold, besides --node-selector.",
    )
    gpu_deploy_label: Annotated[str, AfterValidator(lambda v: label_key(v) if v else v)] = setting(
        GPU_DEPLOY_LABEL,
        "--gpu-deploy-label",
        "The GPU Operator's deploy label for the exporter: it runs where the label is `true` or absent, "
        "and leaves a node where it is anything else (`false`, `paused-for-mig-change`), as the "
        "Operator's own operands do. nvidia.com/gpu.deploy.dcgm-exporter follows what the MIG manager "
        "does to dcgm-exporter. Empty: none.",
    )
    kubelet_root: Annotated[str, AfterValidator(absolute_path)] = setting(
        KUBELET_ROOT,
        "--kubelet-root",
        "The kubelet's --root-dir on the nodes: its pod-resources socket is in <root>/pod-resources "
        "(k0s: /var/lib/k0s/kubelet, MicroK8s: /var/snap/microk8s/common/var/lib/kubelet).",
    )
    apparmor_profile: Annotated[str, AfterValidator(_apparmor)] = setting(
        "unconfined",
        "--apparmor-profile",
        "AppArmor profile of the exporter where it reads other pods' /proc (--topology exporter): "
        "unconfined (default: containerd's default profile refuses ptrace read on Ubuntu, and discovery "
        "then reports ptrace_denied), runtime-default, or localhost/<profile> (one allowing `ptrace "
        "(read)`). Needs Kubernetes 1.30+. Its seccomp profile stays RuntimeDefault either way.",
    )

    def node_affinity_spec(self) -> dict[str, Any] | None:
        """Required node affinity: the requirements, ANDed with the deploy label being true or absent."""
        required = [requirement(text) for text in self.node_affinity]
        label = self.gpu_deploy_label
        alternatives: list[list[dict[str, Any]]] = [[]]
        if label:  # two terms, ORed: the label true, or absent (Operators older than the label)
            alternatives = [
                [{"key": label, "operator": "In", "values": ["true"]}],
                [{"key": label, "operator": "DoesNotExist"}],
            ]
        terms = [{"matchExpressions": [*required, *extra]} for extra in alternatives]
        if not any(term["matchExpressions"] for term in terms):
            return None
        return {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }

    def toleration_specs(self) -> list[dict[str, Any]]:
        return [toleration(text) for text in self.tolerations]

    def apparmor_spec(self) -> dict[str, str]:
        if self.apparmor_profile.startswith("localhost/"):
            return {"type": "Localhost", "localhostProfile": self.apparmor_profile.removeprefix("localhost/")}
        return {"type": "Unconfined" if self.apparmor_profile == "unconfined" else "RuntimeDefault"}
