"""Every setting of the runbook commands and service, read from flags or SERVESCOPE_RUNBOOK_* variables.

Four areas, so that each command takes only the options it uses: where the runbooks are (every command),
where steps read from and what they run (`runbook run`, `runbook-server`), the tokens and the service's
own address and files (`runbook-server`). The names of the variables are those of earlier releases.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, AliasChoices, BaseModel, Field, field_validator
from pydantic_settings import BaseSettings

from servescope.core.catalog.revision import DEFAULT_REVISION_POD_LABELS, pod_label_key
from servescope.core.config import AlertsConfig, load_config
from servescope.core.config_option import config_error
from servescope.core.listen import ListenSetting
from servescope.core.settings_cli import area_config, setting
from servescope.runbooks.actions.base import DEFAULT_EXPORTER_URL, RunContext
from servescope.runbooks.actions.params import HttpUrl, K8sName
from servescope.runbooks.actions.trust import allow_entry
from servescope.runbooks.audit import DEFAULT_AUDIT_LOG

# The Markdown runbooks are package data: an installed servescope finds them without a checkout.
SHIPPED_RUNBOOKS = Path(__file__).resolve().parent / "pages"
ENV_RUNBOOKS = "SERVESCOPE_RUNBOOKS"
PodLabel = Annotated[str, AfterValidator(pod_label_key)]
Connections = Annotated[int, Field(ge=1, le=10_000)]  # a number of open connections the service allows
ENV_TOKEN = "SERVESCOPE_RUNBOOK_TOKEN"
ENV_WEBHOOK_TOKEN = "SERVESCOPE_WEBHOOK_TOKEN"


class FolderSettings(BaseSettings):
    """Where the runbooks are."""

    model_config = area_config("runbook")

    runbooks: Path | None = setting(
        None,
        "--runbooks",
        "Folder of <AlertName>.md runbooks. Empty: the runbooks shipped with servescope.",
        validation_alias=AliasChoices(ENV_RUNBOOKS),
    )

    @field_validator("runbooks", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value  # SERVESCOPE_RUNBOOKS= means the shipped runbooks

    @field_validator("runbooks")
    @classmethod
    def _is_folder(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_dir():
            raise ValueError(f"{value}: not a folder")
        return value

    alerts_config: Path | None = setting(
        None,
        "--alerts-config",
        "The alerts config file the rules were built from (`bundle build --config`): the pages show its "
        "thresholds. Empty: the defaults.",
    )

    @field_validator("alerts_config", mode="before")
    @classmethod
    def _config_loads(cls, value: object) -> object:
        if value is None or value == "":
            return None  # the defaults
        try:  # a file that is not a config is refused at start, naming the field
            return load_config(Path(str(value))) and value
        except ValueError as exc:
            raise ValueError(config_error(Path(str(value)), exc)) from None

    def folder(self) -> Path:
        return self.runbooks if self.runbooks is not None else SHIPPED_RUNBOOKS

    def config(self) -> AlertsConfig:
        """The thresholds the runbooks are read with: --alerts-config, else the defaults."""
        return load_config(self.alerts_config)


class StepSettings(BaseSettings):
    """Where read steps read from and what change steps run; never taken from an alert's labels."""

    model_config = area_config("runbook")

    exporter_url: HttpUrl = setting(
        DEFAULT_EXPORTER_URL, "--exporter-url", "The servescope exporter read actions ask."
    )
    prometheus_url: HttpUrl | None = setting(None, "--prometheus-url", "Prometheus for promql steps.")
    alertmanager_url: HttpUrl | None = setting(
        None, "--alertmanager-url", "Alertmanager for create_silence steps."
    )
    kube_api_url: HttpUrl | None = setting(
        None,
        "--kube-api-url",
        "The Kubernetes API server change steps act through. Empty: the pod's ServiceAccount (in a "
        "cluster), else --kubeconfig, $KUBECONFIG or ~/.kube/config.",
    )
    kube_token_file: str | None = setting(
        None, "--kube-token-file", "With --kube-api-url: the file holding the bearer token to present."
    )
    kube_ca_file: str | None = setting(
        None, "--kube-ca-file", "With --kube-api-url: the CA bundle its https certificate is checked with."
    )
    kubeconfig: str | None = setting(None, "--kubeconfig", "A kubeconfig file to reach the API server with.")
    timeout_seconds: float = setting(
        10.0, "--timeout", "Seconds each request or command of a step may take (at most 600).", gt=0, le=600
    )
    exporter_per_instance: bool = setting(
        False,
        "--exporter-per-instance",
        "Ask the exporter named by the alert's `instance` label (host:port, on the --exporter-url port) "
        "instead of --exporter-url: what a central runbook service in front of a DaemonSet needs. Only an "
        "instance Prometheus scrapes as --exporter-job, or one --exporter-allow names, is asked.",
    )
    exporter_job: str = setting(
        "servescope",
        "--exporter-job",
        "The job label Prometheus scrapes the exporters as: an `instance` among its targets (up{job=...}, "
        "from --prometheus-url) may be asked by read steps.",
        min_length=1,
        max_length=200,
    )
    exporter_allow: list[str] = setting(
        [],
        "--exporter-allow",
        "More instances read steps may ask, besides Prometheus' targets: a CIDR (10.0.0.0/8) or a host "
        "pattern (*.nodes.example); repeat for more. Link-local and metadata addresses are refused whatever "
        "this says.",
    )

    serving_namespaces: list[K8sName] = setting(
        [],
        "--serving-namespace",
        "Namespace where `rollback` steps look for the model's Deployment or Argo Rollout (repeatable): "
        "those the service's Role is in (`deploy render --serving-namespace` sets both). A step may name "
        "its own `namespace`.",
    )
    revision_pod_labels: list[PodLabel] = setting(
        list(DEFAULT_REVISION_POD_LABELS),
        "--revision-pod-label",
        "Pod label whose value is an engine's `revision` (repeatable, in the order the PodMonitor reads "
        "them, `deploy render --revision-pod-label`): `rollback` finds a revision's ReplicaSet by it.",
    )

    audit_log: Path = setting(
        Path(DEFAULT_AUDIT_LOG),
        "--audit-log",
        "The audit trail (JSON Lines, append-only, hash-chained): every authenticated change-step request of "
        "the service, and every `runbook run --execute`, which refuses to act when it cannot write it.",
    )

    @field_validator("exporter_allow")
    @classmethod
    def _allow_entries(cls, value: list[str]) -> list[str]:
        return [allow_entry(entry) for entry in value]

    def context(self, *, execute: bool = False) -> RunContext:
        """The RunContext steps run with."""
        return RunContext(**self.model_dump(exclude={"audit_log"}), execute=execute)


class TokenSettings(BaseSettings):
    """The bearer tokens of the runbook service: change steps, and Alertmanager's webhook."""

    model_config = area_config("runbook")

    token_file: Path | None = setting(
        None,
        "--token-file",
        "File holding the bearer token change steps need (else --token; with neither, change steps are "
        "refused).",
    )
    token: str | None = setting(
        None,
        "--token",
        "The bearer token change steps need, when there is no --token-file. Prefer the file or the "
        "variable: a command line is visible to every user of the machine.",
        repr=False,
    )
    webhook_token_file: Path | None = setting(
        None,
        "--webhook-token-file",
        "File holding the bearer token Alertmanager sends (else --webhook-token; with neither, the webhook "
        "refuses every post).",
    )
    webhook_token: str | None = setting(
        None,
        "--webhook-token",
        "The bearer token Alertmanager sends, when there is no --webhook-token-file.",
        repr=False,
        validation_alias=AliasChoices(ENV_WEBHOOK_TOKEN),
    )


class ServiceSettings(BaseSettings):
    """The runbook service's address and the files it keeps."""

    model_config = area_config("runbook")

    listen: ListenSetting = setting(
        "127.0.0.1:9110",
        "--listen",
        "HOST:PORT the runbook service serves on ([IPv6]:PORT, :PORT for all interfaces).",
    )
    incidents_db: Path = setting(
        Path("servescope-incidents.sqlite"),
        "--incidents-db",
        "SQLite file (WAL) keeping incidents and their step outputs.",
    )

    trusted_proxy: list[str] = setting(
        [],
        "--trusted-proxy",
        "Address or CIDR of a reverse proxy whose X-Forwarded-For names the client in the audit trail "
        "(repeat for more): the rightmost address not itself a trusted proxy is the client; from anyone "
        "else the header is ignored. Trusted proxies are not held to --max-connections-per-ip.",
    )
    max_connections: Connections = setting(
        200,
        "--max-connections",
        "Open connections at most; one more closes the oldest whose request is still arriving (or idle), "
        "or itself when every one is busy.",
    )
    max_connections_per_ip: Connections = setting(
        32, "--max-connections-per-ip", "Open connections from one address at most."
    )
    request_timeout_seconds: float = setting(
        10.0,
        "--request-timeout",
        "Seconds a client has to send a whole request, head and body together, from its first byte (from "
        "the connection, for the first); then the connection is closed. Idle keep-alive connections are "
        "closed after 5 s.",
        gt=0,
        le=300,
    )
    step_workers: int = setting(
        8,
        "--step-workers",
        "Step runs from the pages at once, on threads of their own (4 times as many may wait; more are "
        "answered 503): health and the webhook never wait behind them.",
        ge=1,
        le=64,
    )
    api_docs: bool = setting(
        False, "--api-docs", "Serve /docs and /openapi.json (off: the API is described in docs/runbooks.md)."
    )
    resume_max: int = setting(
        200,
        "--resume-max",
        "At start, incidents whose read steps did not finish (queued or running when the service stopped) "
        "are queued again, oldest first, this many at most; the rest are marked not resumed.",
        ge=0,
        le=100_000,
    )
    retention_days: float = setting(
        30.0,
        "--retention-days",
        "Incidents and their step outputs older than this are deleted (never one whose steps still run).",
        gt=0,
        le=3650,
    )
    retention_max_mb: int = setting(
        512,
        "--retention-max-mb",
        "Past this many MiB of incidents the oldest are deleted (keep it under the volume's size).",
        ge=1,
    )
    shutdown_grace_seconds: float = setting(
        20.0,
        "--shutdown-grace",
        "Seconds a stop (SIGTERM) gives running read steps to finish; the rest are kept queued and resumed "
        "at the next start. Keep it under the pod's terminationGracePeriodSeconds.",
        ge=0,
        le=600,
    )

    @field_validator("trusted_proxy")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        for item in value:
            ipaddress.ip_network(item, strict=False)
        return value


class RunbookSettings(BaseModel):
    """Everything the runbook service reads, one area each."""

    folder: FolderSettings
    steps: StepSettings
    tokens: TokenSettings
    service: ServiceSettings


RUNBOOK_AREAS: tuple[type[BaseSettings], ...] = (FolderSettings, StepSettings, TokenSettings, ServiceSettings)
