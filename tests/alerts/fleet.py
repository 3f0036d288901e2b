"""Engines over time in either topology, as minute-by-minute states: the series Prometheus would hold.

A state per minute: `U` the engine answers (its series exported), `D` it does not while its pod stays (a
crash, a crash loop: the exporter reports it down, a PodMonitor target fails its scrape), `T` the same
while its pod is being deleted (kube-state-metrics' deletion timestamp), `L` a new pod loading its model
(its server does not listen yet: a failing PodMonitor target, nothing the exporter finds), `-` its pod is
gone (the exporter dropped the endpoint, Prometheus the target). Kubernetes and kube-state-metrics are not
in step: `S` the engine stopped as its pod was deleted, kube-state-metrics does not say so yet (its scrape
comes later); `G` the pod is gone from kube-state-metrics while Prometheus still scrapes its target (its
discovery comes later; the exporter drops the endpoint at once, as `-`). In `gap` minutes Prometheus could not
scrape the exporter: none of its series has a sample then (a staleness marker at the first).
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.alerts.pages import KSM_TARGET, sampled
from tests.alerts.promtool import TARGET

EXPORTER_SERIES = {
    "running": "servescope_serving_requests_running",
    "kv": "servescope_serving_kv_cache_usage_ratio",
    "tokens": "servescope_serving_generation_tokens_total",
}
POD_SERIES = {
    "running": "vllm:num_requests_running",
    "kv": "vllm:kv_cache_usage_perc",
    "tokens": "vllm:generation_tokens_total",
}


@dataclass(frozen=True)
class Engine:
    """One engine pod: its model, node, pod name and address."""

    model: str
    pod: str
    address: str
    node: str = "node-a"
    namespace: str = "llm"

    @property
    def endpoint(self) -> str:
        return f"http://{self.address}:8000/metrics"

    def labels(self, podmonitor: bool) -> dict[str, str]:
        """The labels of the engine's own series, as Prometheus stores them in the topology."""
        if podmonitor:
            target = {"job": "vllm", "instance": self.node, "namespace": self.namespace, "pod": self.pod}
            return {
                **target,
                "container": "vllm",
                "endpoint": self.endpoint,
                "model_name": self.model,
                "engine": "0",
            }
        exporter = {**TARGET, "instance": f"{self.node}:9108"}
        return {**exporter, "model_name": self.model, "engine": "0", "endpoint": self.endpoint}

    def down_labels(self, podmonitor: bool) -> dict[str, str]:
        """The labels ServescopeServingEndpointDown carries for this engine."""
        keys = ("instance", "namespace", "pod", "endpoint") if podmonitor else ("job", "instance", "endpoint")
        labels = self.labels(podmonitor)
        return {**{k: labels[k] for k in keys}, "model_name": self.model}

    def series(
        self, states: str, podmonitor: bool, attributed: bool = True, gap: range = range(0)
    ) -> list[dict[str, str]]:
        """The engine's series over the states; `attributed`: the exporter names its pod (the kubelet
        answers)."""
        states = states.replace("L", "D" if podmonitor else "-").replace("S", "D")
        states = states.replace("G", "D" if podmonitor else "-")
        if not podmonitor:
            states = "".join("-" if minute in gap else s for minute, s in enumerate(states))
        names = POD_SERIES if podmonitor else EXPORTER_SERIES
        labels = self.labels(podmonitor)
        answering = [s == "U" for s in states]
        tokens, total = [], 0.0
        for up in answering:
            total += 600 if up else 0
            tokens.append(total if up else None)
        found = [
            sampled(names["running"], labels, [4 if up else None for up in answering]),
            sampled(names["kv"], labels, [0.4 if up else None for up in answering]),
            sampled(names["tokens"], labels, tokens),
        ]
        health = [1.0 if s == "U" else 0.0 if s in "DT" else None for s in states]
        if podmonitor:
            target = {k: labels[k] for k in ("job", "instance", "namespace", "pod", "container", "endpoint")}
            found.append(sampled("up", target, health))
        else:
            source = {k: labels[k] for k in ("job", "instance", "endpoint")}
            found.append(sampled("servescope_source_up", {**source, "source": "vllm"}, health))
            if attributed:
                pod = {"namespace": self.namespace, "pod": self.pod, "container": "vllm"}
                exists = [1.0 if s != "-" else None for s in states]
                found.append(sampled("servescope_serving_endpoint_pod_info", {**source, **pod}, exists))
        pod_keys = {**KSM_TARGET, "namespace": self.namespace, "pod": self.pod}
        deleting = [1.7e9 if s == "T" else None for s in states]
        if any(deleting):
            found.append(sampled("kube_pod_deletion_timestamp", pod_keys, deleting))
        return found
