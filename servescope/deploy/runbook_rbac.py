"""The runbook service's RBAC: exactly the verbs its change steps use, each rule with the step needing it.

A ClusterRole for what is cluster-wide (nodes, the pods of a node in every namespace, their budgets)
and, in each --serving-namespace, a Role for scaling Deployments there. Reads steps need no RBAC: they
ask the exporters and Prometheus over HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servescope.deploy.names import RUNBOOKS, cluster_metadata, namespaced
from servescope.deploy.options import DeployOptions

COMPONENT = "runbooks"


@dataclass(frozen=True)
class Rule:
    group: str
    resource: str
    verbs: tuple[str, ...]
    steps: str  # which steps need it, and for what (docs/kubernetes.md shows it)

    def rendered(self) -> dict[str, Any]:
        return {"apiGroups": [self.group], "resources": [self.resource], "verbs": list(self.verbs)}


CLUSTER_RULES = (
    Rule("", "nodes", ("get", "patch"), "cordon_node, drain_node: read the node, set spec.unschedulable"),
    Rule("", "pods", ("list",), "drain_node: the pods of the node (fieldSelector spec.nodeName)"),
    Rule("", "pods/eviction", ("create",), "drain_node: evict each pod (PodDisruptionBudgets honoured)"),
    Rule("policy", "poddisruptionbudgets", ("list",), "drain_node: the budgets the evictions meet"),
)
NAMESPACED_RULES = (
    Rule("apps", "deployments/scale", ("get", "patch"), "scale_deployment: read and change the replicas"),
    Rule("autoscaling", "horizontalpodautoscalers", ("list",), "scale_deployment: no HPA owns it"),
    Rule("keda.sh", "scaledobjects", ("list",), "scale_deployment: no KEDA ScaledObject owns it"),
)


def _subjects(options: DeployOptions) -> list[dict[str, str]]:
    return [{"kind": "ServiceAccount", "name": RUNBOOKS, "namespace": options.namespace}]


def cluster_role() -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": cluster_metadata(RUNBOOKS, COMPONENT),
        "rules": [rule.rendered() for rule in CLUSTER_RULES],
    }


def cluster_role_binding(options: DeployOptions) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": cluster_metadata(RUNBOOKS, COMPONENT),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": RUNBOOKS},
        "subjects": _subjects(options),
    }


def role(namespace: str) -> dict[str, Any]:
    rules = [rule.rendered() for rule in NAMESPACED_RULES]
    return namespaced("rbac.authorization.k8s.io/v1", "Role", RUNBOOKS, namespace, COMPONENT, rules=rules)


def role_binding(options: DeployOptions, namespace: str) -> dict[str, Any]:
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": RUNBOOKS}
    return namespaced(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        RUNBOOKS,
        namespace,
        COMPONENT,
        roleRef=ref,
        subjects=_subjects(options),
    )


def documents(options: DeployOptions) -> list[dict[str, Any]]:
    docs = [cluster_role(), cluster_role_binding(options)]
    for namespace in options.serving_namespaces:
        docs += [role(namespace), role_binding(options, namespace)]
    return docs
