"""The rollout revision a serving series belongs to: one label name and where its value comes from.

A canary and its stable version serve the same model side by side; only the revision of the pod tells
their requests apart. Both scrape topologies put it in the same label, `revision`, so the per-revision
rules, `servescope canary analyze` and the rollout controllers' templates read one name:

- PodMonitor topology: the PodMonitor copies it from the engine pod's labels (`deploy render
  --revision-pod-label`, the first one the pod carries wins);
- exporter topology: the exporter adds it to the serving series of each engine from the same pod
  labels, in the same order, which it learns from the API server (exporter/k8s/pod_labels.py).

The default order puts the labels rollout controllers set first: Argo Rollouts' `rollouts-pod-template-hash`
(what its AnalysisTemplate receives as `podTemplateHashValue`), then the Deployment controller's
`pod-template-hash` (Flagger's canary and primary are two Deployments), then the version a chart
declares, which does not change when only the engine's flags do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

REVISION_LABEL = "revision"
DEFAULT_REVISION_POD_LABELS = ("rollouts-pod-template-hash", "pod-template-hash", "app.kubernetes.io/version")

# A Kubernetes label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters.
_LABEL_KEY = re.compile(
    r"^(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


def pod_label_key(key: str) -> str:
    """`key` if it is a Kubernetes label key; ValueError naming it otherwise."""
    if not _LABEL_KEY.match(key) or len(key.split("/", maxsplit=1)[0]) > 253:
        raise ValueError(f"{key!r} is not a Kubernetes label key such as pod-template-hash or a.example/rev")
    return key


def revision_of(pod_labels: Mapping[str, str], order: Sequence[str]) -> str:
    """The value of the first label of `order` the pod carries with a value, as the PodMonitor's
    relabeling takes it; "" when it carries none (its series then get no `revision`)."""
    return next((pod_labels[key] for key in order if pod_labels.get(key)), "")
