"""Where things are in the cluster: servescope's namespace, the monitoring stack's, who scrapes whom."""

from __future__ import annotations

from pydantic import ValidationInfo, field_validator

from servescope.core.settings_cli import FixedOptions, repeated, setting
from servescope.deploy import kps
from servescope.deploy.checks import (
    AnyLabels,
    DnsLabel,
    Labels,
    OptionalDnsLabel,
    OptionalObjectName,
    OptionalUrl,
)

# Namespaces Kubernetes itself owns: servescope never creates (and so never deletes) one of them.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _operator_pod_labels(pod: str, cli: str, whose: str) -> Labels:
    """The labels of the pods prometheus-operator runs as `pod`, a repeatable option: who the
    NetworkPolicies let in."""
    return repeated(lambda: {kps.POD_NAME_LABEL: pod}, cli, f"KEY=VALUE label of {whose} (repeatable).")


class ClusterOptions(FixedOptions):
    """Defaults fit kube-prometheus-stack (release `kube-prometheus-stack` in `monitoring`) and the GPU
    Operator (in `gpu-operator`); servescope gets a namespace of its own."""

    namespace: DnsLabel = setting(
        "servescope",
        "--namespace",
        "Namespace of servescope's objects (exporter, runbook service, rules, dashboards). "
        "Its own by default: the exporter needs the `privileged` Pod Security level, which a shared "
        "namespace should not be given.",
    )
    release: DnsLabel = setting(
        kps.CHART,
        "--release",
        "Helm release of kube-prometheus-stack: its Prometheus selects ServiceMonitors, "
        "PodMonitors and PrometheusRules labelled release=<this>; its service names derive from it.",
    )
    kps_name_override: OptionalObjectName = setting(
        "",
        "--kps-name-override",
        "The chart's nameOverride value, if your release sets one (it changes the service names).",
    )
    kps_fullname_override: OptionalObjectName = setting(
        "",
        "--kps-fullname-override",
        "The chart's fullnameOverride value, if your release sets one (the service names then "
        "start with it).",
    )
    prometheus_namespace: DnsLabel = setting(
        "monitoring",
        "--prometheus-namespace",
        "Namespace of Prometheus (and of a PrometheusAgent, if one scrapes instead).",
    )
    prometheus_pod_labels: Labels = _operator_pod_labels(
        kps.PROMETHEUS_POD, "--prometheus-pod-label", "the Prometheus pods, for the NetworkPolicies"
    )
    agent_pod_labels: Labels = _operator_pod_labels(
        kps.AGENT_POD,
        "--agent-pod-label",
        "PrometheusAgent pods in the Prometheus namespace, also let in to scrape the exporters",
    )
    extra_scraper_namespace: OptionalDnsLabel = setting(
        "",
        "--extra-scraper-namespace",
        "Namespace of another scraper let in to the exporters (Grafana Alloy, vmagent, an "
        "OpenTelemetry collector). Empty: none.",
    )
    extra_scraper_pod_labels: AnyLabels = repeated(
        dict,
        "--extra-scraper-pod-label",
        "KEY=VALUE label of that scraper's pods (repeatable). None: every pod of --extra-scraper-namespace.",
    )
    alertmanager_namespace: DnsLabel = setting(
        "monitoring",
        "--alertmanager-namespace",
        "Namespace Alertmanager runs in; it posts alerts to the runbook service.",
    )
    alertmanager_pod_labels: Labels = _operator_pod_labels(
        kps.ALERTMANAGER_POD, "--alertmanager-pod-label", "the Alertmanager pods, for the NetworkPolicies"
    )
    people_namespace: OptionalDnsLabel = setting(
        "",
        "--people-namespace",
        "Namespace whose pods may open the runbook pages, e.g. your ingress controller's. "
        "Empty: none (kubectl port-forward still works).",
    )
    gpu_operator_namespace: DnsLabel = setting(
        "gpu-operator",
        "--gpu-operator-namespace",
        "Namespace of the NVIDIA GPU Operator, whose dcgm-exporter `--dcgm gpu-operator` reads.",
    )
    create_namespace: bool = setting(
        True,
        "--create-namespace/--no-create-namespace",
        "Include the Namespace object (then `kubectl delete -k` deletes it). Refused for a "
        "namespace that the monitoring stack, the GPU Operator or Kubernetes uses: pass "
        "--no-create-namespace to put servescope into a namespace you manage.",
    )
    prometheus_url: OptionalUrl = setting(
        "",
        "--prometheus-url",
        "Prometheus for the runbooks' PromQL steps. Empty: kube-prometheus-stack's service, "
        "http://<fullname>-prometheus.<prometheus-namespace>.svc:9090, named as the chart names it.",
    )
    alertmanager_url: OptionalUrl = setting(
        "",
        "--alertmanager-url",
        "Alertmanager for the runbooks' silence steps. Empty: kube-prometheus-stack's service, "
        "http://<fullname>-alertmanager.<alertmanager-namespace>.svc:9093.",
    )

    @field_validator("create_namespace")
    @classmethod
    def _never_own_a_shared_namespace(cls, value: bool, info: ValidationInfo) -> bool:
        # The namespace fields come first, so they are checked (and in info.data) by now.
        shared = {
            *SYSTEM_NAMESPACES,
            *(info.data.get(name) for name in ("prometheus_namespace", "alertmanager_namespace")),
            *(info.data.get(name) for name in ("gpu_operator_namespace", "people_namespace")),
            info.data.get("extra_scraper_namespace"),
        }
        namespace = info.data.get("namespace")
        if value and namespace in shared:
            raise ValueError(
                f"servescope would own the namespace {namespace!r}, which others use, and `kubectl delete "
                "-k` would delete it with them: choose another --namespace, or --no-create-namespace"
            )
        return value

    # --- what follows from them ---------------------------------------------------------------------
    def chart_fullname(self) -> str:
        return kps.fullname(self.release, self.kps_name_override, self.kps_fullname_override)

    def prometheus_service_url(self) -> str:
        service = kps.prometheus_service(self.chart_fullname())
        return (
            self.prometheus_url or f"http://{service}.{self.prometheus_namespace}.svc:{kps.PROMETHEUS_PORT}"
        )

    def alertmanager_service_url(self) -> str:
        service = kps.alertmanager_service(self.chart_fullname())
        default = f"http://{service}.{self.alertmanager_namespace}.svc:{kps.ALERTMANAGER_PORT}"
        return self.alertmanager_url or default
