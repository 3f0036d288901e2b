"""What a cluster admin chooses when rendering the manifests; every field is one `deploy render` flag."""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from servescope.alerts.config import AlertsConfig
from servescope.deploy.names import (
    DEFAULT_IMAGE,
    EXPORTER,
    EXPORTER_PORT,
    GPU_PRESENT_LABEL,
    RUNBOOKS,
    RUNBOOKS_PORT,
)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DURATION = re.compile(r"^(\d+(ms|s|m|h))+$")
_IMAGE = re.compile(r"^[a-z0-9][^\s]*$")


def _flag(name: str) -> dict[str, Any]:
    return {"cli": name}


class DeployOptions(BaseModel):
    """Defaults fit kube-prometheus-stack installed as release `kube-prometheus-stack` in `monitoring`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str = Field(
        "monitoring",
        json_schema_extra=_flag("--namespace"),
        description="Namespace of every servescope object (the exporter, the runbook service, the rules).",
    )
    create_namespace: bool = Field(
        True,
        json_schema_extra=_flag("--create-namespace/--no-create-namespace"),
        description="Include the Namespace object. With process attribution it carries the Pod Security "
        "label `enforce: privileged` (hostPID and SYS_PTRACE need it); leave it out when the namespace is "
        "shared and managed elsewhere.",
    )
    image: str = Field(
        DEFAULT_IMAGE,
        json_schema_extra=_flag("--image"),
        description="Container image of the exporter and the runbook service (built from deploy/Dockerfile).",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        "IfNotPresent",
        json_schema_extra=_flag("--image-pull-policy"),
        description="Always, IfNotPresent or Never.",
    )
    process_attribution: bool = Field(
        True,
        json_schema_extra=_flag("--process-attribution/--no-process-attribution"),
        description="Attribute GPU processes to serving engines: hostPID, UID 0 with only SYS_PTRACE and "
        "DAC_READ_SEARCH, and the kubelet's pod-resources folder mounted read-only. Off: UID 65532, no "
        "host access, engine discovery off (GPU and DCGM metrics only, unless engines are given by URL).",
    )
    host_network: bool = Field(
        False,
        json_schema_extra=_flag("--host-network/--no-host-network"),
        description="Run the exporter in the node's network namespace. Engine discovery reads listening "
        "sockets from /proc/net/tcp, which shows the exporter's own network: it finds engines only when "
        "they run with hostNetwork too (NetworkPolicies do not apply to host-network pods).",
    )
    node_selector: dict[str, str] = Field(
        default_factory=lambda: {GPU_PRESENT_LABEL: "true"},
        json_schema_extra=_flag("--node-selector"),
        description="KEY=VALUE node label the exporter's nodes carry (repeat the flag for several; the "
        "default is the GPU Operator's nvidia.com/gpu.present=true).",
    )
    runtime_class: str = Field(
        "",
        json_schema_extra=_flag("--runtime-class"),
        description="runtimeClassName of the exporter pods, e.g. nvidia. Empty: the node's default runtime "
        "(the GPU Operator makes the NVIDIA runtime the default, so most clusters need none).",
    )
    dcgm_exporter_url: str = Field(
        "",
        json_schema_extra=_flag("--dcgm-exporter-url"),
        description="Take DCGM fields from the dcgm-exporter on the same node instead of dcgmi (not in the "
        "default image), e.g. http://$(NODE_IP):9400/metrics; $(NODE_IP) is the node's address.",
    )
    scrape_interval: str = Field(
        "15s",
        json_schema_extra=_flag("--scrape-interval"),
        description="How often Prometheus scrapes each exporter (a Prometheus duration).",
    )
    release: str = Field(
        "kube-prometheus-stack",
        json_schema_extra=_flag("--release"),
        description="Helm release of kube-prometheus-stack: its Prometheus selects ServiceMonitors and "
        "PrometheusRules by the label release=<this>, and names its services after it.",
    )
    prometheus_namespace: str = Field(
        "monitoring",
        json_schema_extra=_flag("--prometheus-namespace"),
        description="Namespace Prometheus runs in: the only one let through to the exporters' port.",
    )
    prometheus_pod_labels: dict[str, str] = Field(
        default_factory=lambda: {"app.kubernetes.io/name": "prometheus"},
        json_schema_extra=_flag("--prometheus-pod-label"),
        description="KEY=VALUE label of the Prometheus pods, for the NetworkPolicies (repeatable).",
    )
    alertmanager_namespace: str = Field(
        "monitoring",
        json_schema_extra=_flag("--alertmanager-namespace"),
        description="Namespace Alertmanager runs in; it posts alerts to the runbook service.",
    )
    alertmanager_pod_labels: dict[str, str] = Field(
        default_factory=lambda: {"app.kubernetes.io/name": "alertmanager"},
        json_schema_extra=_flag("--alertmanager-pod-label"),
        description="KEY=VALUE label of the Alertmanager pods, for the NetworkPolicies (repeatable).",
    )
    people_namespace: str = Field(
        "",
        json_schema_extra=_flag("--people-namespace"),
        description="Namespace whose pods may open the runbook pages, e.g. your ingress controller's. "
        "Empty: none (kubectl port-forward still works).",
    )
    prometheus_url: str = Field(
        "",
        json_schema_extra=_flag("--prometheus-url"),
        description="Prometheus for the runbooks' PromQL steps. Empty: "
        "http://<release>-prometheus.<prometheus-namespace>.svc:9090, kube-prometheus-stack's service.",
    )
    alertmanager_url: str = Field(
        "",
        json_schema_extra=_flag("--alertmanager-url"),
        description="Alertmanager for the runbooks' silence steps. Empty: "
        "http://<release>-alertmanager.<alertmanager-namespace>.svc:9093.",
    )
    runbook_url: str = Field(
        "",
        json_schema_extra=_flag("--runbook-url"),
        description="Base of every alert's runbook_url, as people's browsers reach the runbook service "
        "(e.g. your ingress). Empty: http://servescope-runbooks.<namespace>.svc:9110.",
    )
    grafana_url: str = Field(
        AlertsConfig.model_fields["dashboard_base_url"].default,
        json_schema_extra=_flag("--grafana-url"),
        description="Base of the dashboard links in the alerts' annotations.",
    )
    incidents_pvc: str = Field(
        "",
        json_schema_extra=_flag("--incidents-pvc"),
        description="An existing PersistentVolumeClaim keeping the runbook service's incidents and audit "
        "log. Empty: an emptyDir, lost when the pod goes.",
    )

    # --- checks: each error names the value; the CLI adds the flag --------------------------------
    @field_validator("namespace", "prometheus_namespace", "alertmanager_namespace", "release")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        if not _DNS_LABEL.match(value) or len(value) > 63:
            raise ValueError(f"{value!r} is not a DNS label (a-z, 0-9 and '-', at most 63 characters)")
        return value

    @field_validator("people_namespace")
    @classmethod
    def _optional_dns_label(cls, value: str) -> str:
        return cls._dns_label(value) if value else value

    @field_validator("runtime_class", "incidents_pvc")
    @classmethod
    def _optional_name(cls, value: str) -> str:
        if value and (not _DNS_SUBDOMAIN.match(value) or len(value) > 253):
            raise ValueError(f"{value!r} is not a Kubernetes object name (a-z, 0-9, '-' and '.')")
        return value

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        if not _IMAGE.match(value):
            raise ValueError(f"{value!r} is not an image reference such as registry/name:tag")
        return value

    @field_validator("scrape_interval")
    @classmethod
    def _duration(cls, value: str) -> str:
        if not _DURATION.match(value):
            raise ValueError(f"{value!r} is not a Prometheus duration such as 15s or 1m")
        return value

    @field_validator("prometheus_url", "alertmanager_url", "runbook_url", "grafana_url", "dcgm_exporter_url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if value and (parts.scheme not in ("http", "https") or not parts.netloc):
            raise ValueError(f"{value!r} is not an http:// or https:// URL")
        return value

    @field_validator("node_selector", "prometheus_pod_labels", "alertmanager_pod_labels", mode="before")
    @classmethod
    def _pairs(cls, value: object) -> object:
        """From the command line: a list of KEY=VALUE strings."""
        if not isinstance(value, list | tuple):
            return value
        pairs: dict[str, str] = {}
        for item in value:
            key, sep, label_value = str(item).partition("=")
            if not sep:
                raise ValueError(f"{item!r} is not KEY=VALUE")
            pairs[key.strip()] = label_value.strip()
        return pairs

    @field_validator("node_selector", "prometheus_pod_labels", "alertmanager_pod_labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("give at least one KEY=VALUE")
        for key, label_value in value.items():
            prefix, _, name = key.rpartition("/")
            if (prefix and not _DNS_SUBDOMAIN.match(prefix)) or not _LABEL_NAME.match(name) or len(name) > 63:
                raise ValueError(f"{key!r} is not a label key such as example.com/name")
            if label_value and (not _LABEL_NAME.match(label_value) or len(label_value) > 63):
                raise ValueError(
                    f"{key}={label_value!r}: not a label value (at most 63 of A-Z a-z 0-9 - _ .)"
                )
        return value

    # --- what follows from them ---------------------------------------------------------------------
    def prometheus_service_url(self) -> str:
        return self.prometheus_url or f"http://{self.release}-prometheus.{self.prometheus_namespace}.svc:9090"

    def alertmanager_service_url(self) -> str:
        default = f"http://{self.release}-alertmanager.{self.alertmanager_namespace}.svc:9093"
        return self.alertmanager_url or default

    def runbook_base_url(self) -> str:
        return (self.runbook_url or self.runbook_service_url()).rstrip("/")

    def runbook_service_url(self) -> str:
        """Inside the cluster (what Alertmanager posts to), whatever URL people use."""
        return f"http://{RUNBOOKS}.{self.namespace}.svc:{RUNBOOKS_PORT}"

    def exporter_service_url(self) -> str:
        return f"http://{EXPORTER}.{self.namespace}.svc:{EXPORTER_PORT}"


def flag_of(field: str) -> str:
    """The command-line flag of a field (its positive form), e.g. `--namespace`."""
    info = DeployOptions.model_fields.get(field)
    extra = info.json_schema_extra if info is not None else None
    flag = extra.get("cli") if isinstance(extra, dict) else None
    return str(flag).split("/")[0] if flag else field
