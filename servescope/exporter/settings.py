"""Configuration, one class per area. Every field has a default and a description; the CLI's options
are derived from these fields (same defaults, same environment variables), so they cannot drift.
"""

from __future__ import annotations

import socket
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from servescope.common.hosts import HOST_PORT_PATTERN
from servescope.common.listen import ListenSetting
from servescope.common.settings_cli import ENV_PREFIX, area_config, setting
from servescope.exporter.k8s.settings import K8sSettings


class ServerSettings(BaseSettings):
    model_config = area_config("server")

    listen: ListenSetting = setting(
        "127.0.0.1:9108",
        "--listen",
        "Address to serve /metrics, /healthz, /readyz and the APIs on, as HOST:PORT. Use :9108 (all IPv4 "
        "interfaces) or [::]:9108 in a DaemonSet so Prometheus can reach it.",
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
        "Path of the dcgmi executable. Empty: `dcgmi` from PATH, or the bundled servescope-fake-dcgmi with "
        "--simulate.",
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


class VllmSettings(BaseSettings):
    model_config = area_config("vllm")

    urls: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        json_schema_extra={"cli": "--vllm-url"},
        description="Serving endpoints' /metrics URLs (repeat the flag; in the environment, separate with "
        "spaces or commas). Empty: discover the engines on this node.",
    )
    discovery: bool = setting(
        True,
        "--discovery/--no-discovery",
        "With no --vllm-url, find serving engines from NVML's GPU processes and their listening ports, "
        "every minute.",
    )
    interval_seconds: float = setting(5.0, "--vllm-interval", "Seconds between scrapes.", ge=0.5, le=300)
    timeout_seconds: float = setting(
        2.0,
        "--vllm-timeout",
        "Total seconds one endpoint's scrape may take, however slowly it sends; past it the endpoint is "
        "down with reason timeout and the others are published without waiting for it.",
        gt=0,
        le=60,
    )
    max_bytes: int = setting(
        4 * 1024 * 1024,
        "--vllm-max-bytes",
        "Larger responses (counted decompressed) are refused, reason too_large, as soon as they pass it. "
        "Beyond 256 KiB one page at a time is fetched and parsed; the DaemonSet's memory limit is sized for "
        "the default.",
        ge=1024,
        le=64 * 1024 * 1024,
    )
    passthrough: bool = setting(
        True,
        "--passthrough/--no-passthrough",
        "Also re-export each engine's own series (vllm:*, sglang:*) with an `endpoint` label.",
    )
    procfs: str = setting(
        "/proc",
        "--procfs",
        "Where /proc is: the engine-GPU join reads listening sockets and process trees there (in a "
        "container, mount the host's and use hostPID).",
    )

    @field_validator("urls", mode="before")
    @classmethod
    def _split_urls(cls, value: object) -> object:
        # From the environment (or a flag value) "a,b c" means three URLs.
        items = [value] if isinstance(value, str) else value
        if isinstance(items, list):
            return [part for item in items for part in str(item).replace(",", " ").split()]
        return value


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
        256,
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
