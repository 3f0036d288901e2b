"""The runbook service's RBAC: exactly the verbs its change steps use, each rule with the step needing it.

A ClusterRole for what is cluster-wide (nodes, the pods of a node in every namespace, their budgets)
and, in each --serving-namespace, a Role for scaling Deployments and rolling canaries back there. Read
steps need no RBAC: they ask the exporters and Prometheus over HTTP.
"""

from __future__ import annotations

from typing import Any

from servescope.deploy.names import RUNBOOKS, cluster_role, cluster_role_binding, namespaced
from servescope.deploy.options import DeployOptions

COMPONENT = "runbooks"


# (API group, resource, verbs, which steps need it and for what: docs/kubernetes.md shows it)
Rule = tuple[str, str, tuple[str, ...], str]
CLUSTER_RULES: tuple[Rule, ...] = (
    ("", "nodes", ("get", "patch"), "cordon_node, drain_node: read the node, set spec.unschedulable"),
    ("", "pods", ("list",), "drain_node: the pods of the node (fieldSelector spec.nodeName)"),
    ("", "pods/eviction", ("create",), "drain_node: evict each pod (PodDisruptionBudgets honoured)"),
    ("policy", "poddisruptionbudgets", ("list",), "drain_node: the budgets the evictions meet"),
)
NAMESPACED_RULES: tuple[Rule, ...] = (
    ("apps", "deployments/scale", ("get", "patch"), "scale_deployment: read and change the replicas"),
    ("autoscaling", "horizontalpodautoscalers", ("list",), "scale_deployment: no HPA owns it"),
    ("keda.sh", "scaledobjects", ("list",), "scale_deployment: no KEDA ScaledObject owns it"),
    ("apps", "replicasets", ("list",), "rollback: the canary's and the stable's ReplicaSets (labelSelector)"),
    ("apps", "deployments", ("get", "patch"), "rollback: read the Deployment, set its template back"),
    ("argoproj.io", "rollouts", ("get", "patch"), "rollback: read the Rollout; undo: set its template back"),
    ("argoproj.io", "rollouts/status", ("patch",), "rollback: abort the Rollout (status.abort)"),
)


def rendered(rules: tuple[Rule, ...]) -> list[dict[str, Any]]:
    return [
        {"apiGroups": [group], "resources": [resource], "verbs": list(verbs)}
        for group, resource, verbs, _ in rules
    ]


def _subjects(options: DeployOptions) -> list[dict[str, str]]:
    return [{"kind": "ServiceAccount", "name": RUNBOOKS, "namespace": options.namespace}]


def role(namespace: str) -> dict[str, Any]:
    return namespaced(
        "rbac.authorization.k8s.io/v1",
        "Role",
        RUNBOOKS,
        namespace,
        COMPONENT,
        rules=rendered(NAMESPACED_RULES),
    )


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
    docs = [
        cluster_role(RUNBOOKS, COMPONENT, rendered(CLUSTER_RULES)),
        cluster_role_binding(RUNBOOKS, COMPONENT, options.namespace),
    ]
    for namespace in options.serving_namespaces:
        docs += [role(namespace), role_binding(options, namespace)]
    return docs
