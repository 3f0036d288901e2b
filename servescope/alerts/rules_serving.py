"""Serving alerts: GPU saturation, KV pressure and their combination, queues, preemptions, capacity."""

from __future__ import annotations

from servescope import catalog as c
from servescope.alerts.config import AlertsConfig
from servescope.alerts.model import ENGINE_KEYS, GPU_KEYS, Alert, Group, Record, sel
from servescope.alerts.rules_gpu import ON_GPU

ENGINE_BY = "instance, model_name, engine, endpoint"
ON_ENGINE = "{{ $labels.model_name }} engine {{ $labels.engine }} at {{ $labels.endpoint }}"
KV_AVG5M = "engine:servescope_kv_cache_usage:avg5m"
KV_AVG1D = "engine:servescope_kv_cache_usage:avg1d"
KV_STDDEV1D = "engine:servescope_kv_cache_usage:stddev1d"
# The anomaly alert waits until the baseline spans (almost) a day: on a younger series the daily mean and
# deviation describe a few hours only, and every change of load (the first busy morning) reads as an anomaly.
KV_BASELINE_MIN_AGE = "23h"


def on_engine_gpus(cfg: AlertsConfig, engine_expr: str) -> str:
    """An engine-level vector spread onto the GPUs the engine runs on (labels gain gpu and uuid).

    servescope_engine_gpu_info has one series per (engine, GPU, PID): `max by` folds the PIDs.
    """
    info = sel(cfg, c.ENGINE_GPU_INFO.name)
    return f"max by ({ENGINE_BY}, gpu, uuid) (({engine_expr}) * on ({ENGINE_BY}) group_right {info})"


def serving(cfg: AlertsConfig) -> Group:
    # One declarative list of the group's alerts, read top to bottom as the bundle's reference: longer than
    # 40 lines on purpose.
    util = sel(cfg, c.UTILIZATION.name)
    kv = sel(cfg, c.KV_USAGE.name)
    waiting = sel(cfg, c.WAITING.name)
    running = sel(cfg, c.RUNNING.name)
    fleet = f" by ({', '.join(cfg.fleet_by)})" if cfg.fleet_by else ""
    return Group(
        "servescope-serving",
        (
            Alert(
                "ServescopeGpuSaturated",
                f"{util} > {cfg.gpu_saturated_ratio:g}",
                cfg.gpu_saturated_for,
                "warning",
                "A GPU has been compute-saturated for a sustained period.",
                f"{ON_GPU} has been busy {{{{ $value | humanizePercentage }}}} of the time for "
                f"{cfg.gpu_saturated_for}: lower the batch size now, add workers (3-5 min) or queue by "
                "priority.",
                GPU_KEYS,
                "serving",
            ),
            Alert(
                "ServescopeKvCachePressure",
                f"{kv} > {cfg.kv_pressure_ratio:g}",
                cfg.kv_pressure_for,
                "warning",
                "An engine's KV cache is under pressure.",
                f"{ON_ENGINE} uses {{{{ $value | humanizePercentage }}}} of its KV cache: start OOM "
                "prevention (shorter max sequence length, more GPU memory).",
                ENGINE_KEYS,
                "serving",
            ),
            Alert(
                "ServescopeGpuSaturatedKvPressure",
                f"{on_engine_gpus(cfg, f'{kv} > {cfg.kv_pressure_ratio:g}')}"
                f" and on (instance, uuid) ({util} > {cfg.gpu_saturated_ratio:g})",
                cfg.combined_for,
                "critical",
                "A GPU is saturated while the KV cache of its engine is under pressure.",
                f"{ON_ENGINE} uses {{{{ $value | humanizePercentage }}}} of its KV cache while its GPU "
                "{{ $labels.gpu }} ({{ $labels.uuid }}) is compute-saturated: latency is about to break; "
                "shed load or lower the batch size.",
                (*ENGINE_KEYS, "gpu", "uuid"),
                "serving",
            ),
            Alert(
                "ServescopeKvCacheAnomaly",
                f"abs({KV_AVG5M} - {KV_AVG1D}) / clamp_min({KV_STDDEV1D}, {cfg.kv_anomaly_min_stddev:g})"
                f" > {cfg.kv_anomaly_sigmas:g} and {KV_AVG5M} offset {KV_BASELINE_MIN_AGE}",
                cfg.kv_anomaly_for,
                "warning",
                "An engine's KV cache usage departs from its daily baseline.",
                f'{ON_ENGINE}: KV usage is {{{{ $value | printf "%.1f" }}}} daily standard deviations away '
                "from its mean of the last day.",
                ENGINE_KEYS,
                "serving",
            ),
            Alert(
                "ServescopeRequestQueueBuilding",
                f"{waiting} > {cfg.queue_min_waiting:g}"
                f" and {waiting} > {cfg.queue_ratio:g} * clamp_min({running}, 1)",
                cfg.queue_for,
                "warning",
                "Requests queue up faster than the engine runs them.",
                f"{ON_ENGINE} has {{{{ $value }}}} requests waiting, more than {cfg.queue_ratio:g} per "
                "running "
                "request.",
                ENGINE_KEYS,
                "serving",
            ),
            Alert(
                "ServescopePreemptionsSustained",
                f"rate({sel(cfg, c.PREEMPTIONS.name)}[5m]) > {cfg.preemptions_per_second:g}",
                cfg.preemptions_for,
                "warning",
                "An engine keeps preempting requests (KV cache exhausted).",
                f'{ON_ENGINE} preempts {{{{ $value | printf "%.2f" }}}} requests/s: the KV cache is '
                "too small "
                "for the batch.",
                ENGINE_KEYS,
                "serving",
            ),
            Alert(
                "ServescopeGpuUnderutilisedWhileQueued",
                f"{on_engine_gpus(cfg, f'{waiting} > 0')}"
                f" and on (instance, uuid) ({util} < {cfg.underutilised_ratio:g})",
                cfg.underutilised_for,
                "warning",
                "Requests wait while the GPU idles: the batch limit is too low.",
                f"{ON_ENGINE} has {{{{ $value }}}} requests waiting while GPU {{{{ $labels.gpu }}}} is under "
                f"{cfg.underutilised_ratio:.0%} busy: raise max_num_seqs (see "
                "servescope_serving_recommended_max_num_seqs).",
                (*ENGINE_KEYS, "gpu", "uuid"),
                "serving",
            ),
            Alert(
                "ServescopeFleetCapacityBufferLow",
                f"1 - avg{fleet} ({util}) < {cfg.capacity_buffer_ratio:g}",
                cfg.capacity_for,
                "warning",
                "The fleet's spare GPU capacity is below the buffer kept for bursts.",
                f"Only {{{{ $value | humanizePercentage }}}} of the fleet's GPU time is spare (the buffer is "
                f"{cfg.capacity_buffer_ratio:.0%}): add workers before the next burst.",
                cfg.fleet_by,
                "serving",
            ),
        ),
    )


def kv_baseline(cfg: AlertsConfig) -> Group:
    """Recording rules of the KV daily baseline (the anomaly alert compares against them)."""
    return Group(
        "servescope-kv-baseline",
        (
            Record(KV_AVG5M, f"avg_over_time({sel(cfg, c.KV_USAGE.name)}[5m])"),
            Record(KV_AVG1D, f"avg_over_time({KV_AVG5M}[1d])"),
            Record(KV_STDDEV1D, f"stddev_over_time({KV_AVG5M}[1d])"),
        ),
    )
