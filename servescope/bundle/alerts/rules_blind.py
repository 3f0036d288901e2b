"""When the monitoring goes blind: a page once for the fleet (a share of the exporters down or absent, or
none left at all), and tickets for what kube-state-metrics shows and the exporters do not see.

Blindness pages without a symptom, by necessity: the symptoms are measured through what went blind.
"""

from __future__ import annotations

from servescope.bundle.alerts.kube import gpu_nodes, ksm
from servescope.bundle.alerts.model import Alert
from servescope.core.config import AlertsConfig


def _by(cfg: AlertsConfig) -> str:
    return ", ".join(cfg.fleet_by)


def exporters_expected(cfg: AlertsConfig) -> str:
    """How many exporters the fleet should have: one per GPU node kube-state-metrics lists, else the most
    targets of the exporters' job within blind_history (a fleet that shrank on purpose is then missed
    for as long)."""
    by = _by(cfg)
    seen = f"max_over_time((count by ({by}) (up{{{cfg.selector}}}))[{cfg.blind_history}:5m])"
    if not cfg.kube_state_metrics:
        return seen
    return f"(count by ({by}) ({gpu_nodes(cfg)}) or {seen})"


def blind_share(cfg: AlertsConfig) -> str:
    """The share of the expected exporters that do not answer (down, or gone from the targets)."""
    by, expected = _by(cfg), exporters_expected(cfg)
    answering = f"(count by ({by}) (up{{{cfg.selector}}} == 1) or on ({by}) 0 * {expected})"
    return f"1 - {answering} / on ({by}) {expected}"


def node_of_target(cfg: AlertsConfig) -> str:
    """The exporters' targets by node (`node`): `instance` is the node's name (deploy render relabels
    it so), without a port where a static configuration adds one."""
    return f'label_replace(group by (instance) (up{{{cfg.selector}}}), "node", "$1", "instance", "([^:]+).*")'


def blindness(cfg: AlertsConfig) -> list[Alert]:
    keys = cfg.fleet_by
    alerts = [
        Alert(
            "ServescopeMonitoringBlind",
            f"{blind_share(cfg)} >= {cfg.blind_share:g}",
            cfg.blind_for,
            "critical",
            "A large share of the fleet's exporters are down or gone: GPU and serving alerts are blind.",
            "{{ $value | humanizePercentage }} of the exporters expected (one per GPU node) do not answer "
            f"(bound {cfg.blind_share:.0%}): no GPU, memory or serving alert can fire for their nodes. One "
            "page for the fleet; the ServescopeExporterDown tickets of each node are muted under it.",
            keys,
            "exporter",
        ),
        Alert(
            "ServescopeExporterTargetsAbsent",
            f"absent(up{{{cfg.selector}}})",
            cfg.targets_absent_for,
            "critical",
            "Prometheus has no exporter target at all: the DaemonSet or its scrape configuration is gone.",
            f"No target matches {cfg.selector}: the exporter DaemonSet was deleted, its ServiceMonitor "
            "lost, or the selector no longer matches; every GPU and serving alert is blind.",
            (),
            "exporter",
        ),
    ]
    if cfg.kube_state_metrics:
        alerts += _cluster_tickets(cfg)
    return alerts


def _cluster_tickets(cfg: AlertsConfig) -> list[Alert]:
    return [
        Alert(
            "ServescopeGpuNodeWithoutExporter",
            f"{gpu_nodes(cfg)} unless on (node) {node_of_target(cfg)}",
            cfg.node_without_exporter_for,
            "warning",
            "A GPU node has no exporter target: nothing about its GPUs or engines is seen.",
            "GPU node {{ $labels.node }} (nvidia.com/gpu capacity, or the GPU Operator's label) has no "
            f"target of {cfg.selector}: the DaemonSet does not run there (a taint it does not tolerate, a "
            "node selector, a pod that cannot start).",
            ("node",),
            "exporter",
        ),
        Alert(
            "ServescopeKubeStateMetricsAbsent",
            f"absent({ksm(cfg, 'kube_node_info')})",
            cfg.kube_state_metrics_absent_for,
            "warning",
            "No kube-state-metrics series: GPU nodes without an exporter and planned changes go unseen.",
            f"No kube_node_info{{{cfg.kube_state_metrics_selector}}}: GPU nodes without an exporter are "
            "not found, and pods being deleted and Deployments scaled down are judged from the engines' "
            "series alone. Install kube-state-metrics, fix kube_state_metrics_selector, or set "
            "kube_state_metrics: false.",
            (),
            "exporter",
        ),
    ]
