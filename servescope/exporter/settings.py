"""Configuration, one class per area. Every field has a default and a description; the CLI's options
are derived from these fields (same defaults, same environment variables), so they cannot drift.
"""

from __future__ import annotations

import socket
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from servescope.core.batch_controller import DEFAULT_MAX_SEQS
from servescope.core.hosts import HOST_PORT_PATTERN
from servescope.core.listen import ListenSetting
from servescope.core.settings_cli import ENV_PREFIX, area_config, setting
from servescope.exporter.k8s.settings import K8sSettings
from servescope.exporter.vllm.settings import VllmSettings

__all__ = [
    "AREAS",
    "DcgmSettings",
    "DerivedSettings",
    "K8sSettings",
    "NodeSettings",
    "NvmlSettings",
    "ServerSettings",
    "Settings",
    "VllmSettings",
]


class ServerSettings(BaseSettings):
    model_config = area_config("server")

    listen: ListenSetting = setting(
        "127.0.0.1:9108",
        "--listen",
        "Address to serve /metrics, /healthz, /readyz and the APIs on, as HOST:PORT. Use :9108 in a "
        "DaemonSet so Prometheus can reach it: every interface, IPv4 and IPv6 ([::], dual-stack; 0.0.0.0 "
        "on a host without IPv6).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = setting("info", "--log-level", "Log verbosity.")
    api_docs: bool = setting(
        False,
        "--api-docs/--no-api-docs",
        "Serve the HTTP API's OpenAPI schema and its pages (/openapi.json, /docs, /redoc).",
    )


class NodeSettings(BaseSettings):
    model_config = area_config("node")

    hostname: str = setting(
        "",
        "--hostname",
        "Value of the `hostname` label on every GPU series. Empty: NODE_NAME (set it from the downward API "
        "in Kubernetes), else this machine's host name.",
        validation_alias=AliasChoices("SERVESCOPE_NODE_HOSTNAME", "NODE_NAME"),
    )

    def resolved_hostname(self) -> str:
        return self.hostname or socket.gethostname()


class NvmlSettings(BaseSettings):
    model_config = area_config("nvml")

    enabled: bool = setting(True, "--nvml/--no-nvml", "Collect GPU metrics through NVML.")
    interval_seconds: float = setting(
        1.0, "--nvml-interval", "Seconds between NVML collections.", gt=0, le=300
    )
    xid_events: bool = setting(
        True, "--xid-events/--no-xid-events", "Watch NVML for critical XID events in a background thread."
    )
    nvlink_per_link: bool = setting(
        False,
        "--nvlink-per-link/--no-nvlink-per-link",
        "Also export NVLink state and error counters per link (servescope_gpu_nvlink_up, "
        "servescope_gpu_nvlink_link_errors_total: up to 90 series per GPU). Off: links up and errors summed "
        "per GPU only.",
    )


class DcgmSettings(BaseSettings):
    model_config = area_config("dcgm")

    enabled: bool = setting(
        True,
        "--dcgm/--no-dcgm",
        "Collect DCGM fields (NVLink CRC errors, PCIe and NVLink traffic, profiling activity) from a "
        "supervised `dcgmi dmon`, or from --dcgm-exporter-url.",
    )
    dcgmi: str = setting(
        "",
        "--dcgmi",
        "Path of the dcgmi executable. Empty: `dcgmi` from PATH, or servescope-sim's servescope-fake-dcgmi "
        "with --simulate.",
    )
    interval_seconds: float = setting(
        1.0,
        "--dcgm-interval",
        "dcgmi dmon's sampling delay (-d); a child silent for 3 delays is killed and restarted.",
        ge=0.1,
        le=60,
    )
    counters: str = setting(
        "",
        "--dcgm-counters",
        "Counters file choosing the DCGM fields and their metric names; empty: the default set (`servescope "
        "dcgm fields` prints it).",
    )
    na_rows: int = setting(
        5,
        "--dcgm-na-rows",
        "A field N/A for this many consecutive rows on a GPU is reported unsupported there.",
        ge=1,
        le=1000,
    )
    exporter_url: str = setting(
        "",
        "--dcgm-exporter-url",
        "Scrape this dcgm-exporter /metrics instead of running dcgmi (clusters with the GPU Operator "
        "already run one).",
    )
    host: str = setting(
        "",
        "--dcgm-host",
        "Host engine dcgmi dmon connects to (`--host`), e.g. the GPU Operator's standalone nvidia-dcgm:5555. "
        "Empty: the local one.",
        pattern=HOST_PORT_PATTERN,
    )


class DerivedSettings(BaseSettings):
    model_config = area_config("derived")

    interval_seconds: float = setting(
        5.0,
        "--derived-interval",
        "Seconds between updates of the derived signals (peaks, exhaustion, KV headroom, advice); growth "
        "rates and leak verdicts are refit every 30 s.",
        ge=1,
        le=60,
    )
    retention_seconds: float = setting(
        3600.0,
        "--memory-retention",
        "Seconds of 1 s memory samples kept per GPU and per GPU process (16 bytes a sample: 57.6 KB per "
        "curve for an hour). At least 1800, the longest trend window.",
        ge=1800,
        le=86400,
    )
    peak_window_seconds: float = setting(
        60.0,
        "--memory-peak-window",
        "The peak and minimum memory series cover this many seconds of 1 s samples; keep it at least your "
        "scrape interval plus --derived-interval so no spike falls between two scrapes.",
        ge=1,
        le=3600,
    )
    advisor_latency: Literal["ttft", "itl", "e2e"] = setting(
        "ttft",
        "--advisor-latency",
        "Latency histogram whose window P99 the batch-size advisor holds to the SLO: time to first token, "
        "inter-token latency or end-to-end request latency.",
    )
    advisor_slo_seconds: float = setting(
        0.5, "--advisor-slo", "P99 latency objective of the batch-size advisor, in seconds.", gt=0
    )
    advisor_low_utilisation: float = setting(
        0.5,
        "--advisor-low-utilisation",
        "GPU utilisation (0-1) under which the advisor recommends a larger batch.",
        ge=0,
        le=1,
    )
    advisor_max_num_seqs: int = setting(
        DEFAULT_MAX_SEQS,
        "--advisor-max-num-seqs",
        "The max_num_seqs your engines run with (vLLM does not export it); the advisor steps from it, or "
        "from the largest running batch seen if that is higher.",
        ge=1,
    )
    advisor_max_seqs: int = setting(
        1024, "--advisor-max-seqs", "Upper bound of the advisor's recommendation.", ge=1
    )
    advisor_window_seconds: float = setting(
        60.0,
        "--advisor-window",
        "Window of the advisor's P99 (from histogram deltas) and mean GPU utilisation.",
        ge=10,
        le=3600,
    )


class Settings(BaseSettings):
    """All areas together; each reads its own environment variables."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    server: ServerSettings = Field(default_factory=ServerSettings)
    node: NodeSettings = Field(default_factory=NodeSettings)
    nvml: NvmlSettings = Field(default_factory=NvmlSettings)
    dcgm: DcgmSettings = Field(default_factory=DcgmSettings)
    vllm: VllmSettings = Field(default_factory=VllmSettings)
    k8s: K8sSettings = Field(default_factory=K8sSettings)
    derived: DerivedSettings = Field(default_factory=DerivedSettings)


AREAS: tuple[type[BaseSettings], ...] = (
    ServerSettings,
    NodeSettings,
    NvmlSettings,
    DcgmSettings,
    VllmSettings,
    K8sSettings,
    DerivedSettings,
)
