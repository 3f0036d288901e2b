"""Who scrapes what: the exporter's ServiceMonitor and, with --topology podmonitor, the engines' PodMonitor.

Both relabel their targets the same way. `instance` becomes the node's name, so a node keeps its series
when its exporter pod is replaced, and an engine's series and its GPUs' series share the node's name.
The exporter's own series carry the `namespace`, `pod` and `container` of the workloads on its GPUs
(servescope_gpu_pod_info, the per-process series): the operator's target labels of the same names (the
exporter pod's) are dropped so that these survive unrenamed, as dcgm-exporter users do; `endpoint` and
`service` go too (the engines' `endpoint` label is the one the rules join on).
"""

from __future__ import annotations

from typing import Any

from servescope.deploy.names import (
    EXPORTER,
    METRICS_PORT_NAME,
    VLLM_JOB,
    VLLM_MONITOR,
    namespaced,
    selector_labels,
)
from servescope.deploy.options import DeployOptions
from servescope.deploy.revision import revision_relabeling

NODE_NAME_META = "__meta_kubernetes_pod_node_name"
OPERATOR_TARGET_LABELS = "namespace|pod|container|service|endpoint"
# What --agent's PrometheusAgent selects monitors by; every servescope object carries it.
PART_OF = "app.kubernetes.io/part-of"


def monitor_labels(options: DeployOptions) -> dict[str, str]:
    """Extra labels of a ServiceMonitor or PodMonitor: kube-prometheus-stack's `release` selects it,
    unless servescope's own agent scrapes it (then the central Prometheus must not scrape it again)."""
    return {} if options.agent else {"release": options.release}


def _node_as_instance() -> dict[str, Any]:
    return {"sourceLabels": [NODE_NAME_META], "targetLabel": "instance", "action": "replace"}


def service_monitor(options: DeployOptions) -> dict[str, Any]:
    spec = {
        # The job label is the Service's name, `servescope`: what the alert rules select.
        "selector": {"matchLabels": selector_labels("exporter")},
        "namespaceSelector": {"matchNames": [options.namespace]},
        "endpoints": [
            {
                "port": METRICS_PORT_NAME,
                "path": "/metrics",
                "interval": options.scrape_interval,
                "relabelings": [
                    _node_as_instance(),
                    {"action": "labeldrop", "regex": OPERATOR_TARGET_LABELS},
                ],
            }
        ],
    }
    return namespaced(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        EXPORTER,
        options.namespace,
        "exporter",
        extra_labels=monitor_labels(options),
        spec=spec,
    )


def _vllm_namespaces(options: DeployOptions) -> dict[str, Any]:
    return {"matchNames": list(options.vllm_namespaces)} if options.vllm_namespaces else {"any": True}


def _dropped_series(options: DeployOptions) -> dict[str, Any]:
    """The engine series not worth storing (the series budget of docs/scale-out.md), dropped at scrape."""
    if not options.vllm_drop_series:
        return {}
    drop = {"sourceLabels": ["__name__"], "regex": options.vllm_drop_series, "action": "drop"}
    return {"metricRelabelings": [drop]}


def vllm_pod_monitor(options: DeployOptions) -> dict[str, Any]:
    """The engines scraped by Prometheus: their own vllm:* series, with the pod's namespace/pod/container
    (the keys the alert rules join with servescope_gpu_pod_info in this topology)."""
    spec = {
        "selector": {"matchLabels": dict(options.vllm_pod_labels)},
        "namespaceSelector": _vllm_namespaces(options),
        "podMetricsEndpoints": [
            {
                **_dropped_series(options),
                "port": options.vllm_port,
                "path": "/metrics",
                "interval": options.scrape_interval,
                "relabelings": [
                    _node_as_instance(),
                    # One job name for every engine, whatever namespace its PodMonitor is in.
                    {"targetLabel": "job", "replacement": VLLM_JOB, "action": "replace"},
                    # The engine's URL, as the exporter topology labels it: the rules' annotations
                    # name the engine by it (the operator's `endpoint` is only the port's name).
                    {
                        "sourceLabels": ["__address__"],
                        "targetLabel": "endpoint",
                        "replacement": "http://$1/metrics",
                        "action": "replace",
                    },
                    # The pod's rollout revision: the canary alerts compare revisions of a model.
                    *revision_relabeling(options.revision_pod_labels),
                ],
            }
        ],
    }
    return namespaced(
        "monitoring.coreos.com/v1",
        "PodMonitor",
        VLLM_MONITOR,
        options.namespace,
        "engines",
        extra_labels=monitor_labels(options),
        spec=spec,
    )


def documents(options: DeployOptions) -> list[dict[str, Any]]:
    docs = [service_monitor(options)]
    if options.topology == "podmonitor":
        docs.append(vllm_pod_monitor(options))
    return docs
