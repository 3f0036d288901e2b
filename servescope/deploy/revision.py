"""Where an engine pod's rollout revision comes from, in each topology.

PodMonitor topology: the PodMonitor's relabeling puts it on every series it scrapes. Prometheus'
Kubernetes discovery offers each pod label as `__meta_kubernetes_pod_label_<name>`, with every character
outside [a-zA-Z0-9_] replaced by `_`. The labels are joined in the configured order and the first
non-empty value becomes `revision` (servescope.core.catalog.revision); a pod with none of them gets no
`revision`, and its series count as one revision of their model.

Exporter topology: the exporter reads the same labels, in the same order, from the API server
(exporter/k8s/pod_labels.py): a list and a watch of its node's pods. Its ServiceAccount gets exactly
that, cluster-wide, since the node's pods are in every namespace and RBAC cannot grant a list by field
selector; no `get` (no single pod is read), no other resource, and a token in the exporter's pods only
then.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from servescope.core.catalog.revision import REVISION_LABEL
from servescope.core.settings_cli import env_names
from servescope.deploy.names import EXPORTER, cluster_role, cluster_role_binding
from servescope.deploy.options import DeployOptions
from servescope.exporter.k8s.settings import K8sSettings

POD_LABEL_META = "__meta_kubernetes_pod_label_"
# Kubernetes label values hold no `;`, the separator: the first run of other characters is the first
# non-empty value.
FIRST_VALUE = "^;*([^;]+).*$"


def meta_label(pod_label: str) -> str:
    """The discovery meta label of a pod label, e.g. `app.kubernetes.io/version` ->
    `__meta_kubernetes_pod_label_app_kubernetes_io_version`."""
    return POD_LABEL_META + re.sub(r"[^a-zA-Z0-9_]", "_", pod_label)


def revision_relabeling(pod_labels: Sequence[str]) -> list[dict[str, Any]]:
    """The relabeling (prometheus-operator's camelCase form) that sets `revision`; none without labels."""
    if not pod_labels:
        return []
    return [
        {
            "sourceLabels": [meta_label(label) for label in pod_labels],
            "separator": ";",
            "regex": FIRST_VALUE,
            "targetLabel": REVISION_LABEL,
            "replacement": "$1",
            "action": "replace",
        }
    ]


# (API group, resource, verbs, what needs it): the whole of the exporter's RBAC.
EXPORTER_RULES = (
    ("", "pods", ("list", "watch"), "the pods of the exporter's node, for their revision labels"),
)


def exporter_rbac(options: DeployOptions) -> list[dict[str, Any]]:
    """The exporter's ClusterRole and its binding, when it learns revisions from the API server."""
    if not options.exporter_watches_pods:
        return []
    rules = [{"apiGroups": [g], "resources": [r], "verbs": list(v)} for g, r, v, _ in EXPORTER_RULES]
    return [
        cluster_role(EXPORTER, "exporter", rules),
        cluster_role_binding(EXPORTER, "exporter", options.namespace),
    ]


def exporter_env(options: DeployOptions) -> list[dict[str, str]]:
    """The exporter's settings that turn the watch on, with the configured label order."""
    if not options.exporter_watches_pods:
        return []
    return [
        {"name": env_names(K8sSettings, "pod_labels")[0], "value": "true"},
        {
            "name": env_names(K8sSettings, "revision_pod_labels")[0],
            "value": " ".join(options.revision_pod_labels),
        },
    ]
