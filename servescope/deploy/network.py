"""NetworkPolicies: who may reach the exporters and the runbook service, and where the latter may go."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from servescope.deploy import agent
from servescope.deploy.names import (
    EXPORTER,
    EXPORTER_PORT,
    NAMESPACE_NAME_LABEL,
    RUNBOOKS,
    RUNBOOKS_PORT,
    namespaced,
    selector_labels,
)
from servescope.deploy.options import DeployOptions


def _pods(namespace: str, pod_labels: dict[str, str]) -> dict[str, Any]:
    """A peer: the pods with these labels in that namespace."""
    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
        "podSelector": {"matchLabels": dict(pod_labels)},
    }


def _port(number: int) -> dict[str, Any]:
    return {"protocol": "TCP", "port": number}


def _url_port(url: str) -> int:
    """The port a URL names; kube-prometheus-stack's services forward to the same port on the pods."""
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def scrapers(options: DeployOptions) -> list[dict[str, Any]]:
    """Who scrapes servescope: Prometheus, a PrometheusAgent beside it, servescope's own agent, and the
    extra scraper named by the options."""
    peers = [
        _pods(options.prometheus_namespace, options.prometheus_pod_labels),
        _pods(options.prometheus_namespace, options.agent_pod_labels),
    ]
    if options.agent:
        peers.append({"podSelector": {"matchLabels": dict(agent.POD_LABELS)}})  # this namespace
    if options.extra_scraper_namespace:
        peers.append(_pods(options.extra_scraper_namespace, options.extra_scraper_pod_labels))
    return peers


def exporter_policy(options: DeployOptions) -> dict[str, Any]:
    """Port 9108 from the scrapers and from the runbook service (read steps); nothing else."""
    readers = [*scrapers(options), {"podSelector": {"matchLabels": selector_labels("runbooks")}}]
    return _policy(
        options, EXPORTER, "exporter", ingress=[{"from": readers, "ports": [_port(EXPORTER_PORT)]}]
    )


def _runbooks_ingress(options: DeployOptions) -> list[dict[str, Any]]:
    peers = [
        _pods(options.alertmanager_namespace, options.alertmanager_pod_labels),  # the webhook
        *scrapers(options),  # /incidents/metrics
    ]
    if options.people_namespace:
        peers.append({"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: options.people_namespace}}})
    return [{"from": peers, "ports": [_port(RUNBOOKS_PORT)]}]


def _runbooks_egress(options: DeployOptions) -> list[dict[str, Any]]:
    return [
        # DNS wherever the cluster serves it (kube-dns pods, or a node-local cache on a link-local address).
        {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
        {
            "to": [{"podSelector": {"matchLabels": selector_labels("exporter")}}],
            "ports": [_port(EXPORTER_PORT)],
        },
        _prometheus_egress(options),
        {
            "to": [_pods(options.alertmanager_namespace, options.alertmanager_pod_labels)],
            "ports": [_port(_url_port(options.alertmanager_service_url()))],
        },
        # The Kubernetes API, for the change steps: the Service's ClusterIP is rewritten to the API
        # server's endpoints (443 on managed clusters, 6443 on kubeadm's) before the policy sees it.
        {
            "to": [{"ipBlock": {"cidr": cidr}} for cidr in options.api_server_cidrs],
            "ports": [_port(443), _port(6443)],
        },
    ]


def _prometheus_egress(options: DeployOptions) -> dict[str, Any]:
    """To kube-prometheus-stack's Prometheus pods; to the port of --prometheus-url anywhere when it is
    given (with --agent, the receiver's query API: Mimir or a Thanos Querier, often in another cluster)."""
    port = _port(_url_port(options.prometheus_service_url()))
    if options.prometheus_url:
        return {"ports": [port]}
    return {"to": [_pods(options.prometheus_namespace, options.prometheus_pod_labels)], "ports": [port]}


def runbooks_policy(options: DeployOptions) -> dict[str, Any]:
    """Port 9110 from Alertmanager, Prometheus and the people's namespace; out to DNS, the exporters,
    the monitoring stack and the Kubernetes API."""
    return _policy(
        options, RUNBOOKS, "runbooks", ingress=_runbooks_ingress(options), egress=_runbooks_egress(options)
    )


def _policy(
    options: DeployOptions, name: str, component: str, **rules: list[dict[str, Any]]
) -> dict[str, Any]:
    """The NetworkPolicy `name` of `component`'s pods with these ingress and/or egress rules."""
    selected = {"podSelector": {"matchLabels": selector_labels(component)}}
    # policyTypes names the directions given only: one it names with no rule would deny all that traffic.
    spec = {**selected, "policyTypes": [direction.capitalize() for direction in rules], **rules}
    return namespaced("networking.k8s.io/v1", "NetworkPolicy", name, options.namespace, component, spec=spec)


def documents(options: DeployOptions) -> list[dict[str, Any]]:
    return [exporter_policy(options), runbooks_policy(options)]
