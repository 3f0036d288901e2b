"""Named overrides of the alert config. `demo` shortens every `for` and window so that the simulator's
faults (played at the demo pace) become alerts within minutes; production keeps the defaults."""

from __future__ import annotations

from typing import Any

from servescope.core.config import AlertsConfig

# Thresholds are left alone: the demo must fire for the same reasons production does, only sooner.
DEMO: dict[str, Any] = {
    "gpu_saturated_for": "1m",
    "gpu_saturated_window": "1m",
    "kv_pressure_for": "1m",
    "combined_for": "1m",
    "slo_fast_for": "1m",
    "slo_slow_for": "5m",
    "p99_for": "2m",
    "queue_for": "2m",
    "preemptions_for": "2m",
    "underutilised_for": "2m",
    "capacity_for": "2m",
    "leak_for": "30s",
    # The 5m growth rate exists after 2.5 min of history, the 30m one only after 15.
    "exhaustion_window": "5m",
    "exhaustion_for": "30s",
    "memory_headroom_for": "1m",
    "over_budget_for": "1m",
    "hardware_window": "1m",
    "hardware_for": "30s",
    "nvlink_crc_for": "15s",
    "event_for": "15s",
    "thermal_for": "2m",
    "power_for": "5m",
    "gpu_lost_for": "15s",
    "source_down_for": "30s",
    "exporter_down_for": "30s",
    "absent_for": "2m",
    "series_dropped_window": "2m",
    "series_dropped_for": "1m",
    "engines_unreachable_for": "1m",
    "agent_silence_window": "1m",
    "agent_silent_for": "30s",
    "scheduler_stuck_window": "2m",
    "scheduler_stuck_for": "1m",
    "restart_loop_for": "15s",
    "request_error_for": "2m",
    "slo_bucket_missing_for": "5m",
    # A canary with a quarter of a demo node's traffic (4 req/s) serves 200 requests in 50 s: judged
    # within a minute of the rollout, over 2 minutes, instead of 10.
    "canary": {"window": "2m", "min_requests": 200, "worse_for": "1m", "burn_for": "1m"},
    "endpoint_down_window": "2m",
    "endpoint_down_for": "30s",
    "planned_change_lag": "30s",
    "blind_for": "30s",
    "targets_absent_for": "1m",
    "node_without_exporter_for": "2m",
    "kube_state_metrics_absent_for": "2m",
    "leak_fit_window": "30m",
    "leak_growth_window": "2m",
    # The growth bound is a rate judged over each half: production's 4 MiB/min over 30 minutes is 120 MiB
    # per half, well above what an allocator's sawtooth and noise leave in 10-minute means. Over 2-minute
    # halves the same rate is 8 MiB, inside that wobble (5-30 MiB/min between a GPU's first minute
    # records, while its means cover one to three sawtooth periods): the demo keeps the 120 MiB instead.
    # Its leaks grow 2 GiB/min.
    "leak_min_bytes_per_minute": 60 * 1024**2,
    # The demo runs on one machine without a cluster: there is no kube-state-metrics to read.
    "kube_state_metrics": False,
}
PROFILES: dict[str, dict[str, Any]] = {"default": {}, "demo": DEMO}


def with_profile(cfg: AlertsConfig, profile: str, **overrides: Any) -> AlertsConfig:
    """`cfg` with the profile's overrides, then `overrides`, validated again; a section (`canary`) is
    overridden field by field, the others of `cfg` kept."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
    merged = cfg.model_dump()
    for changes in (PROFILES[profile], overrides):
        for key, value in changes.items():
            section = merged.get(key)
            merged[key] = (
                {**section, **value} if isinstance(section, dict) and isinstance(value, dict) else value
            )
    return AlertsConfig.model_validate(merged)
