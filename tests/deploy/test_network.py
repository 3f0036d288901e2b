"""The NetworkPolicies, evaluated the way Kubernetes does for a given peer, port and direction."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from servescope.deploy.network import exporter_policy
from tests.deploy.manifests import VARIANTS, Doc, find, matches, rendered


@dataclass(frozen=True)
class Peer:
    namespace: str
    labels: dict[str, str] = field(default_factory=dict)


def _peer_matches(selector: Doc, peer: Peer, policy_namespace: str) -> bool:
    if "ipBlock" in selector:
        return False
    if "namespaceSelector" in selector:
        namespace_labels = {"kubernetes.io/metadata.name": peer.namespace}
        if not matches(selector["namespaceSelector"].get("matchLabels", {}), namespace_labels):
            return False
    elif peer.namespace != policy_namespace:
        return False
    return matches(selector.get("podSelector", {}).get("matchLabels", {}), peer.labels)


def allows(policy: Doc, direction: str, peer: Peer, port: int, protocol: str = "TCP") -> bool:
    """Whether one of the policy's rules lets this traffic through (to or from the selected pods)."""
    key, peers_key = ("ingress", "from") if direction == "ingress" else ("egress", "to")
    for rule in policy["spec"].get(key, []):
        ports = rule.get("ports")
        port_ok = not ports or any(p["port"] == port and p.get("protocol", "TCP") == protocol for p in ports)
        peers = rule.get(peers_key)
        peer_ok = not peers or any(_peer_matches(s, peer, policy["metadata"]["namespace"]) for s in peers)
        if port_ok and peer_ok:
            return True
    return False


PROMETHEUS = {"app.kubernetes.io/name": "prometheus"}
ALERTMANAGER = {"app.kubernetes.io/name": "alertmanager"}
RUNBOOK_PODS = {"app.kubernetes.io/name": "servescope", "app.kubernetes.io/component": "runbooks"}
EXPORTER_PODS = {"app.kubernetes.io/name": "servescope", "app.kubernetes.io/component": "exporter"}


def _policy(variant: str, name: str) -> Doc:
    return find(rendered(variant), "NetworkPolicy", name)


def _policy_selecting(variant: str, name: str, workload: str) -> Doc:
    """The NetworkPolicy `name`, checked to select the pods of the variant's `workload` (kind)."""
    policy = _policy(variant, name)
    pods = find(rendered(variant), workload)["spec"]["template"]["metadata"]["labels"]
    assert matches(policy["spec"]["podSelector"]["matchLabels"], pods)
    return policy


@pytest.mark.parametrize("variant", ["default", "elsewhere"])
def test_only_prometheus_and_the_runbook_service_reach_the_exporters_port(variant: str) -> None:
    options = VARIANTS[variant]
    policy = _policy_selecting(variant, "servescope", "DaemonSet")
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # the exporter may still call its engines and DNS
    prometheus = Peer(options.prometheus_namespace, PROMETHEUS)
    assert allows(policy, "ingress", prometheus, 9108)
    assert not allows(policy, "ingress", prometheus, 9109)
    assert allows(policy, "ingress", Peer(options.namespace, RUNBOOK_PODS), 9108)
    assert not allows(policy, "ingress", Peer(options.prometheus_namespace, {"app": "grafana"}), 9108)
    assert not allows(policy, "ingress", Peer("default", PROMETHEUS), 9108)
    assert not allows(policy, "ingress", Peer("default", RUNBOOK_PODS), 9108)


@pytest.mark.parametrize("variant", ["default", "elsewhere"])
def test_runbook_service_is_reached_by_alertmanager_prometheus_and_the_people_namespace(variant: str) -> None:
    options = VARIANTS[variant]
    policy = _policy_selecting(variant, "servescope-runbooks", "Deployment")
    assert allows(policy, "ingress", Peer(options.alertmanager_namespace, ALERTMANAGER), 9110)
    assert allows(policy, "ingress", Peer(options.prometheus_namespace, PROMETHEUS), 9110)
    assert not allows(policy, "ingress", Peer(options.alertmanager_namespace, ALERTMANAGER), 9108)
    assert not allows(policy, "ingress", Peer("default", {"app": "curl"}), 9110)
    people = allows(policy, "ingress", Peer("ingress-nginx", {"app": "controller"}), 9110)
    assert people == bool(options.people_namespace)


@pytest.mark.parametrize("variant", ["default", "elsewhere"])
def test_runbook_service_may_only_call_dns_the_exporters_prometheus_and_alertmanager(variant: str) -> None:
    options = VARIANTS[variant]
    policy = _policy(variant, "servescope-runbooks")
    assert "Egress" in policy["spec"]["policyTypes"]
    assert allows(policy, "egress", Peer("kube-system", {"k8s-app": "kube-dns"}), 53, "UDP")
    assert allows(policy, "egress", Peer("kube-system", {"k8s-app": "kube-dns"}), 53, "TCP")
    assert allows(policy, "egress", Peer(options.namespace, EXPORTER_PODS), 9108)
    assert allows(policy, "egress", Peer(options.prometheus_namespace, PROMETHEUS), 9090)
    assert allows(policy, "egress", Peer(options.alertmanager_namespace, ALERTMANAGER), 9093)
    assert not allows(policy, "egress", Peer("default", {"app": "web"}), 443)
    assert not allows(policy, "egress", Peer(options.namespace, EXPORTER_PODS), 22)


def test_the_evaluator_refuses_what_no_rule_names() -> None:
    # The checks above are only as good as this: a policy with no rules lets nothing in.
    empty = {"metadata": {"namespace": "monitoring"}, "spec": {"ingress": []}}
    assert not allows(empty, "ingress", Peer("monitoring", PROMETHEUS), 9108)
    open_rule = {"metadata": {"namespace": "monitoring"}, "spec": {"ingress": [{}]}}
    assert allows(open_rule, "ingress", Peer("anywhere", {}), 1)


PROMETHEUS_AGENT = {"app.kubernetes.io/name": "prometheus-agent"}
OWN_AGENT = {"app.kubernetes.io/name": "prometheus-agent", "operator.prometheus.io/name": "servescope-agent"}


@pytest.mark.parametrize("name", ["servescope", "servescope-runbooks"])
def test_prometheus_agents_and_the_extra_scraper_may_scrape(name: str) -> None:
    port = 9108 if name == "servescope" else 9110
    default, agent = _policy("default", name), _policy("agent", name)
    # A PrometheusAgent beside Prometheus (kube-prometheus-stack's agentMode) scrapes in both.
    for policy in (default, agent):
        assert allows(policy, "ingress", Peer("monitoring", PROMETHEUS_AGENT), port)
    # servescope's own agent, in servescope's namespace, only where it is rendered.
    assert allows(agent, "ingress", Peer("servescope", OWN_AGENT), port)
    assert not allows(default, "ingress", Peer("servescope", OWN_AGENT), port)
    assert not allows(
        agent, "ingress", Peer("servescope", {"app.kubernetes.io/name": "prometheus-agent"}), port
    )
    # The extra scraper: its namespace and labels, nothing else there.
    alloy = Peer("alloy", {"app.kubernetes.io/name": "alloy"})
    assert allows(agent, "ingress", alloy, port) and not allows(default, "ingress", alloy, port)
    assert not allows(agent, "ingress", Peer("alloy", {"app": "other"}), port)


def test_an_extra_scraper_without_labels_means_every_pod_of_its_namespace() -> None:
    options = VARIANTS["default"].model_copy(update={"extra_scraper_namespace": "vm"})
    policy = exporter_policy(options)
    assert allows(policy, "ingress", Peer("vm", {"app": "vmagent"}), 9108)
    assert not allows(policy, "ingress", Peer("other", {"app": "vmagent"}), 9108)
