"""What the bundle's expressions may read: the names servescope exports and the kind of each."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

PROMETHEUS_OWN = frozenset({"up", "ALERTS", "ALERTS_FOR_STATE"})
# kube-state-metrics' series the rules read (its v2 names), with their kinds.
KUBE_STATE_METRICS = {
    "kube_node_info": "gauge",
    "kube_node_labels": "gauge",
    "kube_node_status_capacity": "gauge",
    "kube_pod_deletion_timestamp": "gauge",
    "kube_pod_owner": "gauge",
    "kube_replicaset_owner": "gauge",
    "kube_deployment_status_replicas_unavailable": "gauge",
}
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


@dataclass(frozen=True)
class Metrics:
    """Names servescope exports, with the kind of each (histogram samples are counters)."""

    kinds: dict[str, str]

    def known(self, name: str) -> bool:
        return name in self.kinds or name in PROMETHEUS_OWN or _vllm_alias(name)


@cache
def exported_metrics() -> Metrics:
    from servescope.core.catalog import CATALOG
    from servescope.core.catalog.capacity import CAPACITY
    from servescope.core.dcgm.counters import load_counters, specs_of

    kinds: dict[str, str] = dict(KUBE_STATE_METRICS)
    for spec in (*CATALOG, *CAPACITY, *specs_of(load_counters())):
        kind = str(spec.kind)
        if kind == "histogram":
            for suffix in HISTOGRAM_SUFFIXES:
                kinds[spec.name + suffix] = "counter"
        else:
            kinds[spec.name] = kind
    return Metrics(kinds)


def _vllm_alias(name: str) -> bool:
    """A vLLM (or SGLang, TensorRT-LLM, TGI) name servescope understands, with any of its prefixes."""
    from servescope.core.vllm.aliases import lookup, split_name

    split = split_name(name)
    if split is None:
        return False
    backend, base = split
    candidates = [base, *(base.removesuffix(s) for s in HISTOGRAM_SUFFIXES if base.endswith(s))]
    return any(lookup(backend, candidate) is not None for candidate in candidates)


def is_counter(name: str, metrics: Metrics, records: set[str]) -> bool:
    if name in records or name in PROMETHEUS_OWN:
        return False
    if name in metrics.kinds:
        return metrics.kinds[name] == "counter"
    return name.endswith(("_total", *HISTOGRAM_SUFFIXES))
