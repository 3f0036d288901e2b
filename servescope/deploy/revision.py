"""The PodMonitor's relabeling that puts the engine pod's rollout revision on every series it scrapes.

Prometheus' Kubernetes discovery offers each pod label as `__meta_kubernetes_pod_label_<name>`, with
every character outside [a-zA-Z0-9_] replaced by `_`. The labels are joined in the configured order and
the first non-empty value becomes `revision` (servescope.catalog.revision); a pod with none of them
gets no `revision`, and its series count as one revision of their model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from servescope.catalog.revision import REVISION_LABEL

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
