"""Every threshold, window, selector and link of the alert bundle, in one object a file overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from servescope.common.durations import is_duration

MIB = 1024 * 1024

# XIDs that mean the GPU or its driver state is broken (NVIDIA's XID catalogue): 48 double-bit ECC,
# 62 internal micro-controller halt, 63/64 ECC page retirement or row remapping event/failure, 74 NVLink
# error, 79 fallen off the bus, 92 high single-bit ECC rate, 94/95 contained/uncontained ECC error,
# 119/120 GSP errors.
CRITICAL_XIDS = (48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120)


class AlertsConfig(BaseModel):
    """Defaults follow the operators' seed guide; every field can be overridden by `--config FILE`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # --- where things are --------------------------------------------------------------------------
    selector: str = Field('job="servescope"', description="Label matchers selecting the exporter's series.")
    runbook_base_url: str = Field(
        "http://servescope-runbooks.monitoring.svc:9110",
        description="Base of runbook_url: <base>/runbooks/<Alert>.",
    )
    dashboard_base_url: str = Field("http://grafana.monitoring.svc:3000", description="Grafana base URL.")
    namespace: str = Field("monitoring", description="Namespace of the PrometheusRule.")
    release_label: str = Field(
        "kube-prometheus-stack",
        description="`release` label of the PrometheusRule: kube-prometheus-stack only loads rules "
        "that carry "
        "its Helm release name.",
    )
    # --- GPU load and KV cache (seed guide: >85% sustained, KV >70%) ------------------------------
    gpu_saturated_ratio: float = Field(0.85, gt=0, le=1)
    gpu_saturated_for: str = "10m"
    kv_pressure_ratio: float = Field(0.70, gt=0, le=1)
    kv_pressure_for: str = "5m"
    combined_for: str = "5m"
    kv_anomaly_sigmas: float = Field(3.0, gt=0)
    kv_anomaly_min_stddev: float = Field(
        0.02, gt=0, description="Floor of the daily deviation (flat baselines)."
    )
    kv_anomaly_for: str = "15m"
    # --- latency SLO (seed guide: P99 under 500 ms) ------------------------------------------------
    slo_objective: float = Field(0.99, gt=0, lt=1, description="Share of requests under slo_latency_le.")
    slo_latency_le: str = Field(
        "0.5",
        description="The time-to-first-token bound: an existing bucket boundary, written with a dot.",
    )
    slo_e2e_latency_le: str = Field(
        "60.0",
        description="The end-to-end bound. Not the TTFT bound: end-to-end includes the whole decode, so a "
        "sub-second bound misses every answer longer than a few tokens. 60 s holds a 1,000-token answer at "
        "50 ms a token; set it to what the product promises.",
    )
    slo_fast_for: str = "2m"
    slo_slow_for: str = "15m"
    p99_histogram: str = Field("ttft", pattern="^(ttft|itl|e2e)$")
    p99_threshold_seconds: float = Field(0.5, gt=0)
    p99_for: str = "10m"
    # --- queueing and scheduling -------------------------------------------------------------------
    queue_ratio: float = Field(1.0, gt=0, description="Waiting requests per running request.")
    queue_min_waiting: float = Field(5, ge=0)
    queue_for: str = "10m"
    preemptions_per_second: float = Field(0.1, gt=0)
    preemptions_for: str = "15m"
    underutilised_ratio: float = Field(0.5, gt=0, le=1)
    underutilised_for: str = "10m"
    capacity_buffer_ratio: float = Field(
        0.20, gt=0, lt=1, description="Spare capacity the fleet keeps (20%)."
    )
    capacity_for: str = "15m"
    fleet_by: tuple[str, ...] = Field((), description="Labels a fleet is grouped by, e.g. [cluster].")
    # --- memory ------------------------------------------------------------------------------------
    leak_for: str = "10m"
    exhaustion_seconds: float = Field(3600, gt=0)
    exhaustion_window: str = Field("30m", pattern="^(5m|30m)$")
    exhaustion_for: str = "5m"
    memory_headroom_ratio: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="Free device memory at the 1 s peak, as a share of the total. Not 20%: vLLM preallocates "
        "gpu_memory_utilization of the GPU, so a serving GPU never has 20% free by design.",
    )
    memory_headroom_for: str = "15m"
    over_budget_bytes: float = Field(1024 * MIB, ge=0)
    over_budget_for: str = "15m"
    # --- hardware ----------------------------------------------------------------------------------
    hardware_window: str = "10m"
    nvlink_crc_errors: float = Field(10, ge=0, description="CRC errors per hardware_window on one GPU.")
    nvlink_replay_errors: float = Field(10, ge=0)
    pcie_replays: float = Field(10, ge=0)
    hardware_for: str = "10m"
    critical_xids: tuple[int, ...] = CRITICAL_XIDS
    event_for: str = "1m"
    thermal_for: str = "10m"
    power_for: str = "30m"
    gpu_lost_for: str = "1m"
    # --- the monitoring itself ---------------------------------------------------------------------
    source_down_for: str = "5m"
    exporter_down_for: str = "5m"
    absent_for: str = "15m"
    # --- Alertmanager ------------------------------------------------------------------------------
    webhook_url: str = Field(
        "http://servescope-runbooks.monitoring.svc:9110/alertmanager/webhook",
        description="servescope's runbook service: every alert is posted here.",
    )
    webhook_credentials_file: str = Field(
        "/etc/alertmanager/secrets/servescope-runbooks/token",
        description="Bearer token file Alertmanager sends to the runbook service (it refuses "
        "unauthenticated posts).",
    )

    @model_validator(mode="after")
    def _durations(self) -> AlertsConfig:
        for name in type(self).model_fields:
            if name.endswith(("_for", "_window")):
                value = getattr(self, name)
                if not is_duration(value):
                    raise ValueError(f"{name}: {value!r} is not a Prometheus duration such as 30s, 5m, 1h")
        return self

    @field_validator("slo_latency_le", "slo_e2e_latency_le")
    @classmethod
    def _le(cls, value: str) -> str:
        # Prometheus 3 writes le values as floats ("0.5", "1.0"); a bound without a dot would not match.
        float(value)
        if "." not in value:
            raise ValueError(f"{value!r}: write the bound with a dot (e.g. 1.0), as vLLM's buckets are")
        return value

    def slo_bound(self, sli: str) -> str:
        """The `le` bucket boundary of an SLI: "ttft" or "e2e"."""
        return self.slo_e2e_latency_le if sli == "e2e" else self.slo_latency_le

    @property
    def error_budget(self) -> float:
        return 1 - self.slo_objective


def load_config(path: Path | None) -> AlertsConfig:
    """Defaults, overridden by the YAML (or JSON) mapping in `path`; errors name the file and the field."""
    if path is None:
        return AlertsConfig()
    try:
        data: Any = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    if data is None:
        return AlertsConfig()
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    return AlertsConfig.model_validate(data)
