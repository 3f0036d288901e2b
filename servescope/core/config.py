"""Every threshold, window, selector and link of the alert bundle, in one object a file overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import ConfigDict, Field, field_validator, model_validator

from servescope.core.canary_config import CanaryConfig
from servescope.core.config_capacity import CapacityRegressionConfig
from servescope.core.config_pages import MIB, PageSettings
from servescope.core.durations import is_duration

DURATION_SUFFIXES = ("_for", "_window", "_tolerance", "_grace", "_history")
# Who scrapes the engines: the exporter (its servescope_serving_* series), or Prometheus through a
# PodMonitor (the engines' own vllm:* series). `deploy render --topology` takes the same values.
Topology = Literal["exporter", "podmonitor"]
# A share of a whole, as a fraction: more than none, at most all of it (a GPU busy all the time).
Share = Annotated[float, Field(gt=0, le=1)]
# A share that leaves part of the whole out: an objective, a buffer or a bound that all of it would void.
PartShare = Annotated[float, Field(gt=0, lt=1)]

# XIDs that mean the GPU or its driver state is broken (NVIDIA's XID catalogue): 46 GPU stopped
# processing (a hung engine: its channels need a reset), 48 double-bit ECC, 62 internal micro-controller
# halt, 64 row remapping failure, 74 NVLink error, 79 fallen off the bus, 94/95 contained/uncontained
# ECC error, 119/120 GSP errors, 140 unrecovered ECC error, 154 the driver changed the GPU's recovery
# action (a reset or a reboot is required).
CRITICAL_XIDS = (46, 48, 62, 64, 74, 79, 94, 95, 119, 120, 140, 154)
# XIDs whose recovery (a drain and a reset) can wait for a quiet hour: 63 ECC page retirement or row
# remapping recorded, 92 high single-bit ECC rate.
DRAIN_XIDS = (63, 92)


class AlertsConfig(PageSettings, CapacityRegressionConfig):
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
    engine_topology: Topology = Field(
        "exporter",
        description="Who scrapes the engines (deploy render --topology). `exporter`: the exporter's "
        "normalised servescope_serving_* series, joined to GPUs by servescope_engine_gpu_info. `podmonitor`: "
        "the engines' own vllm:* series (engine_selector), joined to GPUs on `namespace, pod` by "
        "servescope_gpu_pod_info.",
    )
    engine_selector: str = Field(
        'job="vllm"',
        description="With engine_topology podmonitor: label matchers selecting the engines' own series "
        "(the PodMonitor's job).",
    )
    # --- GPU load and KV cache (seed guide: >85% sustained, KV >70%) ------------------------------
    gpu_saturated_ratio: Share = 0.85
    gpu_saturated_for: str = "10m"
    gpu_saturated_window: str = Field(
        "10m", description="Busy share averaged over this window: one low sample does not reset `for`."
    )
    gpu_saturated_sm_active_ratio: Share = Field(
        0.80,
        description="The same bound on DCGM SM activity (field 1002), used where DCGM reports it: NVML "
        "utilisation is ~100% for any decoding engine, SM activity measures how much of the GPU works.",
    )
    kv_pressure_ratio: Share = 0.70
    kv_pressure_for: str = "5m"
    combined_for: str = "5m"
    kv_anomaly_sigmas: float = Field(
        3.0, gt=0, description="Daily deviations above the daily mean that make 5 min KV usage an anomaly."
    )
    kv_anomaly_min_stddev: float = Field(
        0.02,
        gt=0,
        description="Floor of the daily deviation, in KV usage (0-1): on a flat baseline a tiny deviation "
        "would make every change of load an anomaly.",
    )
    kv_anomaly_for: str = "15m"
    # --- latency SLO (seed guide: P99 under 500 ms) ------------------------------------------------
    slo_objective: PartShare = Field(0.99, description="Share of requests under slo_latency_le.")
    slo_latency_le: str = Field(
        "0.5",
        description="The time-to-first-token bound, written with a dot. An engine whose histogram has no "
        "bucket there is judged from its nearest lower bucket (conservative: the requests between that "
        "bucket and the bound count as misses).",
    )
    slo_e2e_latency_le: str = Field(
        "60.0",
        description="The end-to-end bound. Not the TTFT bound: end-to-end includes the whole decode, so a "
        "sub-second bound misses every answer longer than a few tokens. 60 s holds a 1,000-token answer at "
        "50 ms a token; set it to what the product promises.",
    )
    slo_fast_for: str = "2m"
    slo_slow_for: str = "15m"
    slo_fast_keep_firing_for: str = Field(
        "15m",
        description="A fast burn stays firing this long after its windows dip under the burn rate: one "
        "long breach whose 5 min ratio wavers is one page, not one per dip.",
    )
    p99_histogram: str = Field("ttft", pattern="^(ttft|itl|e2e)$")
    p99_threshold_seconds: float = Field(0.5, gt=0)
    p99_for: str = "10m"
    slo_bucket_missing_for: str = "30m"
    # --- queueing and scheduling -------------------------------------------------------------------
    queue_ratio: float = Field(1.0, gt=0, description="Waiting requests per running request.")
    queue_min_waiting: float = Field(5, ge=0)
    queue_for: str = "10m"
    preemptions_per_second: float = Field(0.1, gt=0)
    preemptions_for: str = "15m"
    underutilised_ratio: Share = 0.5
    underutilised_for: str = "10m"
    capacity_buffer_ratio: PartShare = Field(0.20, description="Spare capacity the fleet keeps (20%).")
    capacity_for: str = "15m"
    scheduler_stuck_window: str = Field(
        "5m", description="An engine with requests running that generates no token over this window hangs."
    )
    scheduler_stuck_for: str = "5m"
    restart_loop_window: str = "30m"
    restart_loop_resets: int = Field(2, ge=1, description="Engine restarts (counter resets) per window.")
    restart_loop_for: str = "1m"
    request_error_ratio: PartShare = Field(
        0.05, description="Share of finished requests that ended in abort or error."
    )
    request_error_min_rate: float = Field(
        0.1, ge=0, description="Finished requests/s below which the ratio is not judged (too few)."
    )
    request_error_for: str = "10m"
    endpoints_ratio: PartShare = Field(
        0.75,
        description="Healthy endpoints of a model, as a share of its median of the last day.",
    )
    endpoints_for: str = "15m"
    fleet_by: tuple[str, ...] = Field((), description="Labels a fleet is grouped by, e.g. [cluster].")
    # --- memory ------------------------------------------------------------------------------------
    leak_for: str = "10m"
    exhaustion_seconds: float = Field(3600, gt=0, description="Time to exhaustion (s) under which it alerts.")
    exhaustion_window: str = Field("30m", pattern="^(5m|30m)$")
    exhaustion_for: str = "5m"
    memory_headroom_ratio: PartShare = Field(
        0.05,
        description="Free device memory at the 1 s peak, as a share of the total. Not 20%: vLLM preallocates "
        "gpu_memory_utilization of the GPU, so a serving GPU never has 20% free by design.",
    )
    memory_headroom_for: str = "15m"
    memory_headroom_budget_share: Share = Field(
        0.5,
        description="On a GPU an engine runs on, the bound is at most this share of what its "
        "gpu_memory_utilization leaves free: at 0.95, 2.5% free is the alert, not 5%.",
    )
    over_budget_bytes: float = Field(1024 * MIB, ge=0, description="Floor of the over-budget bound.")
    over_budget_ratio: float = Field(
        0.03,
        ge=0,
        description="Over-budget bound as a share of the engine's budget (gpu_memory_utilization x total): "
        "a TP=8 engine holds ~1.4 GiB of NCCL and CUDA graph memory outside it by design.",
    )
    over_budget_for: str = "15m"
    # --- hardware ----------------------------------------------------------------------------------
    hardware_window: str = "10m"
    nvlink_crc_errors: float = Field(10, ge=0, description="CRC errors per hardware_window on one GPU.")
    nvlink_replay_errors: float = Field(10, ge=0)
    pcie_replays: float = Field(10, ge=0)
    pcie_link_busy_ratio: Share = Field(
        0.3,
        description="Mean utilisation over hardware_window above which a GPU's PCIe link must reach its "
        "maximum generation (at idle GPUs lower it to save power).",
    )
    pcie_link_for: str = "10m"
    hardware_for: str = "10m"
    nvlink_crc_for: str = Field(
        "1m", description="Short: a burst that leaves the window within 10 minutes must still alert."
    )
    critical_xids: tuple[int, ...] = CRITICAL_XIDS
    drain_xids: tuple[int, ...] = DRAIN_XIDS
    xid_keep_firing_for: str = Field(
        "24h",
        description="An XID alert stays this long after the event: the GPU stays broken until it is "
        "reset, which no series tells apart from a GPU that recovered (silence it after the reset).",
    )
    event_for: str = "1m"
    thermal_for: str = "10m"
    power_for: str = "30m"
    gpu_lost_for: str = "1m"
    # --- the monitoring itself ---------------------------------------------------------------------
    source_down_for: str = "5m"
    exporter_down_for: str = "5m"
    source_stale_intervals: float = Field(
        3, gt=0, description="A source is stale when its last success is older than this many intervals."
    )
    source_stale_min_seconds: float = Field(
        60, ge=0, description="Floor of the staleness bound: clock skew between exporter and Prometheus."
    )
    nvml_lost_window: str = Field(
        "6h", description="How far back a node's GPU series count as 'had them' when all are gone."
    )
    endpoint_forgotten_window: str = Field(
        "6h", description="How long an endpoint the exporter forgot while down stays alerted on."
    )
    absent_for: str = "15m"
    series_dropped_window: str = Field(
        "15m", description="Window over which an endpoint's dropped samples (the exporter's limits) count."
    )
    series_dropped_for: str = "15m"
    engines_unreachable_for: str = Field(
        "15m", description="How long a node's engines stay unreachable by its exporter, none scraped."
    )
    agent_shard_labels: tuple[str, ...] = Field(
        ("prometheus", "prometheus_replica"),
        min_length=1,
        description="External labels naming an agent shard on its remote-written series "
        "(prometheus-operator's: the PrometheusAgent and the pod); the last must be set for a shard's "
        "series to be watched.",
    )
    agent_history_window: str = Field(
        "1h", description="How far back a node counts as scraped by a shard that went silent since."
    )
    agent_silence_window: str = Field(
        "3m",
        description="A shard with no sample for this long is silent (its scrape interval, several times).",
    )
    agent_silent_for: str = "2m"
    canary: CanaryConfig = Field(
        default_factory=CanaryConfig, description="What makes a canary revision worse than the stable one."
    )
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
            if name.endswith(DURATION_SUFFIXES):
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
