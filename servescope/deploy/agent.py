"""--agent: a PrometheusAgent that scrapes servescope's monitors and remote-writes what it scraped.

It selects the ServiceMonitors and PodMonitors of servescope's namespace by their part-of label (which
then carry no `release` label, so the central Prometheus does not scrape the same targets), spreads the
targets over `shards` (prometheus-operator hashes each target's address), and writes to a Prometheus with
its remote-write receiver on, or to Thanos Receive or Mimir (docs/scale-out.md). It needs to read
Services, Endpoints, EndpointSlices and Pods wherever the monitors point, hence a ClusterRole.
"""

from __future__ import annotations

from typing import Any

from servescope.deploy import kps, names
from servescope.deploy.names import AGENT, APP, NAMESPACE_NAME_LABEL, namespaced
from servescope.deploy.options import DeployOptions
from servescope.deploy.scraping import PART_OF

COMPONENT = "agent"
# The labels prometheus-operator gives the agent's pods: what the NetworkPolicies let in.
POD_LABELS = {kps.POD_NAME_LABEL: kps.AGENT_POD, kps.CR_NAME_LABEL: AGENT}
_READ = ["get", "list", "watch"]


def _selectors(options: DeployOptions) -> dict[str, Any]:
    own = {"matchLabels": {PART_OF: APP}}
    here = {"matchLabels": {NAMESPACE_NAME_LABEL: options.namespace}}
    return {
        "serviceMonitorSelector": own,
        "serviceMonitorNamespaceSelector": here,
        "podMonitorSelector": own,
        "podMonitorNamespaceSelector": here,
    }


def prometheus_agent(options: DeployOptions) -> dict[str, Any]:
    spec = {
        "serviceAccountName": AGENT,
        "shards": options.agent_shards,
        "replicas": 1,
        "scrapeInterval": options.scrape_interval,
        **_selectors(options),
        "remoteWrite": [{"url": options.remote_write_target()}],
    }
    return namespaced(
        "monitoring.coreos.com/v1alpha1", "PrometheusAgent", AGENT, options.namespace, COMPONENT, spec=spec
    )


def service_account(options: DeployOptions) -> dict[str, Any]:
    return namespaced("v1", "ServiceAccount", AGENT, options.namespace, COMPONENT)


def cluster_role() -> dict[str, Any]:
    return names.cluster_role(
        AGENT,
        COMPONENT,
        [
            {"apiGroups": [""], "resources": ["services", "endpoints", "pods"], "verbs": _READ},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": _READ},
        ],
    )


def cluster_role_binding(options: DeployOptions) -> dict[str, Any]:
    return names.cluster_role_binding(AGENT, COMPONENT, options.namespace)


def documents(options: DeployOptions) -> list[dict[str, Any]]:
    if not options.agent:
        return []
    return [
        service_account(options),
        cluster_role(),
        cluster_role_binding(options),
        prometheus_agent(options),
    ]
