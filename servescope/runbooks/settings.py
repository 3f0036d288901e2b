"""Every setting of the runbook commands and service, read from flags or SERVESCOPE_RUNBOOK_* variables.

Four areas, so that each command takes only the options it uses: where the runbooks are (every command),
where steps read from and what they run (`runbook run`, `runbook-server`), the tokens and the service's
own address and files (`runbook-server`). The names of the variables are those of earlier releases.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from pydantic import AliasChoices, BaseModel, field_validator
from pydantic_settings import BaseSettings

from servescope.common.listen import ListenSetting
from servescope.common.settings_cli import area_config, setting
from servescope.runbooks.actions.base import DEFAULT_EXPORTER_URL, RunContext
from servescope.runbooks.actions.params import HttpUrl
from servescope.runbooks.actions.trust import allow_entry
from servescope.runbooks.audit import DEFAULT_AUDIT_LOG

# The Markdown runbooks are package data: an installed servescope finds them without a checkout.
SHIPPED_RUNBOOKS = Path(__file__).resolve().parent / "pages"
ENV_RUNBOOKS = "SERVESCOPE_RUNBOOKS"
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

    def folder(self) -> Path:
        return self.runbooks if self.runbooks is not None else SHIPPED_RUNBOOKS


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
    kubectl: str = setting("kubectl", "--kubectl", "kubectl to run change steps with.")
    dcgmi: str = setting("dcgmi", "--dcgmi", "dcgmi for dcgm_sample steps.")
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

    @field_validator("exporter_allow")
    @classmethod
    def _allow_entries(cls, value: list[str]) -> list[str]:
        return [allow_entry(entry) for entry in value]

    def context(self, *, execute: bool = False) -> RunContext:
        """The RunContext steps run with."""
        return RunContext(**self.model_dump(), execute=execute)


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
    audit_log: Path = setting(
        Path(DEFAULT_AUDIT_LOG), "--audit-log", "JSON Lines file recording every change-step request."
    )
    incidents_db: Path = setting(
        Path("servescope-incidents.sqlite"),
        "--incidents-db",
        "SQLite file (WAL) keeping incidents and their step outputs.",
    )

    trusted_proxy: list[str] = setting(
        [],
        "--trusted-proxy",
        "IP address of a reverse proxy whose X-Forwarded-For names the client in the audit log (repeat for "
        "more); from anyone else the header is ignored.",
    )
    max_connections: int = setting(
        200,
        "--max-connections",
        "Open connections at most; one more is closed at once, and past this many requests in flight the "
        "answer is 503.",
        ge=1,
        le=10_000,
    )
    header_timeout_seconds: float = setting(
        10.0,
        "--header-timeout",
        "Seconds a client has to send a request's headers (and its body) before the connection is closed; "
        "idle keep-alive connections are closed after 5 s.",
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

    @field_validator("trusted_proxy")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        for item in value:
            ipaddress.ip_address(item)
        return value


class RunbookSettings(BaseModel):
    """Everything the runbook service reads, one area each."""

    folder: FolderSettings
    steps: StepSettings
    tokens: TokenSettings
    service: ServiceSettings


RUNBOOK_AREAS: tuple[type[BaseSettings], ...] = (FolderSettings, StepSettings, TokenSettings, ServiceSettings)
