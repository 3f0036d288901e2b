"""What a cluster admin chooses when rendering the manifests; every field is one `deploy render` flag."""

from __future__ import annotations

from typing import Literal

from pydantic import ValidationInfo, field_validator

from servescope.core.catalog.revision import DEFAULT_REVISION_POD_LABELS, pod_label_key
from servescope.core.config import AlertsConfig, Topology
from servescope.core.hosts import HOST_PORT_PATTERN
from servescope.core.settings_cli import cli_flag, repeated, setting
from servescope.deploy import checks
from servescope.deploy.agent_options import AgentOptions
from servescope.deploy.capacity_options import CapacityJobOptions
from servescope.deploy.checks import (
    Duration,
    Image,
    Labels,
    OptionalObjectName,
    OptionalUrl,
    PortName,
    Regex,
)
from servescope.deploy.names import (
    DEFAULT_IMAGE,
    EXPORTER,
    EXPORTER_PORT,
    GPU_PRESENT_LABEL,
    RUNBOOKS,
    RUNBOOKS_PORT,
)
from servescope.deploy.runbook_options import RunbookDeployOptions

DcgmSource = Literal["gpu-operator", "exporter-url", "dcgmi", "off"]
# What the PodMonitor drops of the engines' series before Prometheus stores them: the `_created` series
# (one per counter and histogram), the buckets of vllm:iteration_tokens_total (the rules read its _count),
# vLLM's deprecated alias of the inter-token latency, and the per-request size and time histograms no
# rule or dashboard reads. The rules' own series stay (tests/deploy/test_topologies.py checks it).
VLLM_DROP_SERIES = (
    "vllm:.+_created|vllm:iteration_tokens_total_bucket|vllm:request_(time_per_output_token_seconds|"
    "inference_time_seconds|prompt_tokens|generation_tokens|max_num_generation_tokens|params_max_tokens|"
    "params_n|prefill_kv_computed_tokens|num_preemptions)_(bucket|count|sum)"
)


class DeployOptions(RunbookDeployOptions, AgentOptions, CapacityJobOptions):
    """Defaults fit a GPU Operator cluster monitored by kube-prometheus-stack (docs/kubernetes.md)."""

    image: Image = setting(
        DEFAULT_IMAGE,
        "--image",
        "Container image of the exporter and the runbook service (built from deploy/Dockerfile).",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = setting(
        "IfNotPresent", "--image-pull-policy", "Always, IfNotPresent or Never."
    )
    topology: Topology = setting(
        "exporter",
        "--topology",
        "exporter: each exporter finds and scrapes the engines on its node (the derived signals "
        "need it; hostPID and ptrace for the socket walk). podmonitor: Prometheus scrapes the engines "
        "through a PodMonitor; the exporter adds GPU series and servescope_gpu_pod_info only, with no "
        "hostPID and no capability.",
    )
    process_memory: bool = setting(
        False,
        "--process-memory/--no-process-memory",
        "With --topology podmonitor: still give the exporter hostPID, UID 0, SYS_PTRACE and "
        "DAC_READ_SEARCH, so per-process GPU memory names its processes. The exporter topology has them "
        "anyway.",
    )
    pod_resources: bool = setting(
        True,
        "--pod-resources/--no-pod-resources",
        "Mount the kubelet's pod-resources socket folder read-only (GPU -> pod attribution, "
        "servescope_gpu_pod_info). It takes UID 0, no capability. Off: no hostPath at all.",
    )
    passthrough: bool = setting(
        False,
        "--passthrough/--no-passthrough",
        "Let the exporter re-export each engine's own vllm:* series. Off on Kubernetes: "
        "Prometheus scrapes the engines itself, and the same series would be stored twice.",
    )
    host_network: bool = setting(
        False,
        "--host-network/--no-host-network",
        "Run the exporter in the node's network namespace (NetworkPolicies do not apply to it). "
        "Not needed to reach engines: the exporter reads each engine's own network namespace.",
    )
    node_selector: Labels = repeated(
        lambda: {GPU_PRESENT_LABEL: "true"},
        "--node-selector",
        "KEY=VALUE node label the exporter's nodes carry (repeatable; the default is the GPU "
        "Operator's nvidia.com/gpu.present=true).",
    )
    runtime_class: OptionalObjectName = setting(
        "nvidia",
        "--runtime-class",
        "runtimeClassName of the exporter pods: the GPU Operator's `nvidia` class (since its "
        "v25.10, CDI is on and nvidia is not the default runtime). Empty: the node's default runtime.",
    )
    priority_class: OptionalObjectName = setting(
        "system-node-critical",
        "--priority-class",
        "priorityClassName of the exporter pods, as dcgm-exporter and the GPU Operator use. Empty: none.",
    )
    dcgm: DcgmSource = setting(
        "gpu-operator",
        "--dcgm",
        "Where DCGM fields come from. gpu-operator: the Operator's dcgm-exporter on the same "
        "node, through a Service with internalTrafficPolicy Local in --gpu-operator-namespace. "
        "exporter-url: --dcgm-exporter-url. dcgmi: the image's dcgmi (built with DCGM=1). off: none.",
    )
    dcgm_host: str = setting(
        "",
        "--dcgm-host",
        "With --dcgm dcgmi: the host engine `dcgmi dmon --host` connects to. Empty: the GPU "
        "Operator's standalone one, nvidia-dcgm.<gpu-operator-namespace>.svc:5555.",
        pattern=HOST_PORT_PATTERN,
    )
    dcgm_exporter_url: str = setting(
        "",
        "--dcgm-exporter-url",
        "With --dcgm exporter-url: the dcgm-exporter to read, e.g. "
        "http://$(NODE_IP):9400/metrics where it listens on the host network ($(NODE_IP) is the node's "
        "address).",
    )
    scrape_interval: Duration = setting(
        "15s",
        "--scrape-interval",
        "How often Prometheus scrapes each exporter and engine (a Prometheus duration).",
    )
    vllm_pod_labels: Labels = repeated(
        lambda: {"app.kubernetes.io/name": "vllm"},
        "--vllm-pod-label",
        "With --topology podmonitor: KEY=VALUE label of the engine pods the PodMonitor selects (repeatable).",
    )
    vllm_port: PortName = setting(
        "http",
        "--vllm-port",
        "With --topology podmonitor: name of the engine container's port serving /metrics.",
    )
    vllm_namespaces: list[str] = repeated(
        list,
        "--vllm-namespace",
        "With --topology podmonitor: namespaces of the engine pods (repeatable). None: all.",
    )
    vllm_drop_series: Regex = setting(
        VLLM_DROP_SERIES,
        "--vllm-drop-series",
        "With --topology podmonitor: regular expression of the engine series names the "
        "PodMonitor drops before they are stored. The default drops the _created series and the histograms "
        "no rule reads (docs/scale-out.md). Empty: keep every series.",
    )
    revision_pod_labels: list[str] = repeated(
        lambda: list(DEFAULT_REVISION_POD_LABELS),
        "--revision-pod-label",
        "Pod label whose value is the engine's rollout `revision` (repeatable, the first the pod carries "
        "wins); the per-revision rules and the canary alerts read it, and the runbook service's rollback "
        "steps find a revision's ReplicaSet by it. The PodMonitor relabels it (--topology podmonitor); the "
        "exporter reads it from the API server (--topology exporter, --pod-revisions).",
    )
    pod_revisions: bool = setting(
        True,
        "--pod-revisions/--no-pod-revisions",
        "With --topology exporter and --pod-resources: the exporter lists and watches the metadata of its "
        "node's pods through the API server and labels each engine's serving series with its pod's "
        "`revision`; a ClusterRole with list and watch on pods, and a ServiceAccount token in its pods. "
        "Off: neither, and the serving series carry no revision.",
    )
    runbook_url: OptionalUrl = setting(
        "",
        "--runbook-url",
        "Base of every alert's runbook_url, as people's browsers reach the runbook service "
        "(e.g. your ingress). Empty: http://servescope-runbooks.<namespace>.svc:9110.",
    )
    grafana_url: OptionalUrl = setting(
        AlertsConfig.model_fields["dashboard_base_url"].default,
        "--grafana-url",
        "Base of the dashboard links in the alerts' annotations.",
    )

    # --- checks: each error names the value; the settings bridge adds the flag ----------------------
    @field_validator("vllm_namespaces")
    @classmethod
    def _namespaces(cls, value: list[str]) -> list[str]:
        return [checks.dns_label(name) for name in value]

    @field_validator("revision_pod_labels")
    @classmethod
    def _revision_labels(cls, value: list[str]) -> list[str]:
        return [pod_label_key(key) for key in value]

    @field_validator("dcgm_exporter_url")
    @classmethod
    def _dcgm_url(cls, value: str, info: ValidationInfo) -> str:
        checks.optional_url(value)
        wanted = info.data.get("dcgm") == "exporter-url"
        if wanted and not value:
            raise ValueError("--dcgm exporter-url needs the URL of a dcgm-exporter")
        if value and not wanted:
            raise ValueError(f"{value!r} is read only with --dcgm exporter-url")
        return value

    # --- what follows from them ---------------------------------------------------------------------
    @property
    def host_pid(self) -> bool:
        """hostPID, UID 0, SYS_PTRACE and DAC_READ_SEARCH: for the socket walk or per-process memory."""
        return self.topology == "exporter" or self.process_memory

    @property
    def exporter_watches_pods(self) -> bool:
        """The exporter learns its engines' revisions from the API server (RBAC and a token for it)."""
        return self.topology == "exporter" and self.pod_resources and self.pod_revisions

    @property
    def runs_as_root(self) -> bool:
        """The kubelet's socket and other processes' /proc entries are root's."""
        return self.host_pid or self.pod_resources

    def runbook_base_url(self) -> str:
        return (self.runbook_url or self.runbook_service_url()).rstrip("/")

    def runbook_service_url(self) -> str:
        """Inside the cluster (what Alertmanager posts to), whatever URL people use."""
        return f"http://{RUNBOOKS}.{self.namespace}.svc:{RUNBOOKS_PORT}"

    def exporter_service_url(self) -> str:
        return f"http://{EXPORTER}.{self.namespace}.svc:{EXPORTER_PORT}"


def flag_of(field: str) -> str:
    """The command-line flag of a field (its positive form), e.g. `--namespace`."""
    return cli_flag(DeployOptions, field).split("/")[0]
