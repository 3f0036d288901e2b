"""Serving alerts: GPU saturation, KV pressure and their combination, queues, preemptions, capacity."""

from __future__ import annotations

from servescope.bundle.alerts.exprs import (
    BASELINE_MIN_AGE,
    ON_ENGINE,
    ON_GPU,
    engine_active,
    engine_by,
    on_engine_gpus,
    pool_spare,
    saturated,
)
from servescope.bundle.alerts.model import ENGINE_KEYS, GPU_KEYS, Alert, Group
from servescope.bundle.alerts.rules_kv_baseline import KV_AVG1D, KV_AVG5M, KV_STDDEV1D
from servescope.bundle.alerts.rules_slo import PAGE, burn
from servescope.core import catalog as c
from servescope.core.config import AlertsConfig
from servescope.core.topology import sel

COMBINED_KEYS = (*ENGINE_KEYS, "hostname", "gpu", "uuid")
# About the engine: a tensor-parallel engine on 8 saturated GPUs is one alert, not 8.
PAGE_KEYS = (*ENGINE_KEYS, "hostname")
# The fleet's average over many GPUs is smooth already: 5 min of samples per GPU take out one reading's
# dip without delaying a fleet-wide shortage by the 10 min a single GPU's average needs.
FLEET_SMOOTHING = "5m"


def kv_pressed(cfg: AlertsConfig) -> str:
    """Engines over the KV pressure bound that ran steps in the last 5 min (the value is the KV usage)."""
    kv = sel(cfg, c.KV_USAGE.name)
    return f"{kv} > {cfg.kv_pressure_ratio:g} and on ({engine_by(cfg)}) {engine_active(cfg)}"


def pressed_on_saturated(cfg: AlertsConfig) -> str:
    """Engines under KV pressure on a saturated GPU of theirs: one series per engine, whatever the number
    of its GPUs (a TP group is one engine on N GPUs); the value is the KV usage. A risk, not a harm: vLLM
    runs near full KV under load by design, and queues and preemptions are how it copes."""
    on_saturated = f"{on_engine_gpus(cfg, kv_pressed(cfg))} and on (instance, uuid) {saturated(cfg)}"
    return f"max by ({engine_by(cfg)}, hostname) ({on_saturated})"


def hurting(cfg: AlertsConfig) -> str:
    """The KV-pressed engines of models whose TTFT budget burns at a paging rate: the harm (the burn on the
    SLO's own bound) with its explanation (this engine, out of KV on saturated GPUs)."""
    return f"{pressed_on_saturated(cfg)} and on (model_name) ({burn(cfg, 'ttft', PAGE)})"


def serving(cfg: AlertsConfig) -> Group:
    # One declarative list of the group's alerts, read top to bottom as the bundle's reference: longer than
    # 40 lines on purpose.
    util = sel(cfg, c.UTILIZATION.name)
    waiting = sel(cfg, c.WAITING.name)
    running = sel(cfg, c.RUNNING.name)
    return Group(
        "servescope-serving",
        (
            Alert(
                "ServescopeGpuSaturated",
                saturated(cfg),
                cfg.gpu_saturated_for,
                "warning",
                "A GPU has been compute-saturated for a sustained period.",
                f"{ON_GPU} has been busy {{{{ $value | humanizePercentage }}}} on average over "
                f"{cfg.gpu_saturated_window} (DCGM SM activity where reported, else NVML utilisation): "
                "shed or queue load by priority now, add workers (3-5 min).",
                GPU_KEYS,
                "gpu",
            ),
            Alert(
                "ServescopeKvCachePressure",
                kv_pressed(cfg),
                cfg.kv_pressure_for,
                "warning",
                "An engine's KV cache is under pressure.",
                f"{ON_ENGINE} uses {{{{ $value | humanizePercentage }}}} of its KV cache while running: "
                "start OOM prevention (shorter max sequence length, more GPU memory).",
                ENGINE_KEYS,
                "serving",
            ),
            Alert(
                "ServescopeGpuSaturatedKvPressure",
                pressed_on_saturated(cfg),
                cfg.combined_for,
                "warning",
                "An engine's KV cache is under pressure while its GPUs are saturated.",
                f"{ON_ENGINE} uses {{{{ $value | humanizePercentage }}}} of its KV cache while GPUs it runs "
                "on {{ $labels.hostname }} are compute-saturated: the TTFT objective holds; shed or queue "
                "load by priority, or add workers, before latency breaks.",
                PAGE_KEYS,
                "serving",
            ),
            Alert(
                "ServescopeKvPressureHurtingRequests",
                hurting(cfg),
                cfg.slo_fast_for,
                "critical",
                "The TTFT budget burns fast while an engine of the model is out of KV on saturated GPUs.",
                "{{ $labels.model_name }}'s time-to-first-token budget burns at a paging rate, and its "
                "engine at {{ $labels.endpoint }} uses {{ $value | humanizePercentage }} of its KV cache "
                "while GPUs it runs on {{ $labels.hostname }} are compute-saturated: shed load or add "
                "workers now.",
                PAGE_KEYS,
                "serving",
                keep_firing_for=cfg.slo_fast_keep_firing_for,
            ),
            Alert(
                "ServescopeKvCacheAnomaly",
                # Rises only: a drop (a restart, a quiet night) frees memory and harms nobody.
                f"({KV_AVG5M} - {KV_AVG1D}) / clamp_min({KV_STDDEV1D}, {cfg.kv_anomaly_min_stddev:g})"
                f" > {cfg.kv_anomaly_sigmas:g} and {KV_AVG5M} offset {BASELINE_MIN_AGE}",
                cfg.kv_anomaly_for,
                "warning",
                "An engine's KV cache usage departs from its daily baseline.",
                f'{ON_ENGINE}: KV usage is {{{{ $value | printf "%.1f" }}}} daily standard deviations above '
                "its mean of the last day.",
                ("hostname", "model_name", "engine", "endpoint"),
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
                COMBINED_KEYS,
                "serving",
            ),
            Alert(
                "ServescopeFleetCapacityBufferLow",
                f"{pool_spare(cfg, FLEET_SMOOTHING)} < {cfg.capacity_buffer_ratio:g}",
                cfg.capacity_for,
                "warning",
                "A model pool's spare GPU capacity is below the buffer kept for bursts.",
                "Only {{ $value | humanizePercentage }} of the GPU time of {{ $labels.model_name }}'s "
                f"engines is spare (the buffer is {cfg.capacity_buffer_ratio:.0%}): add workers before the "
                "next burst.",
                (*cfg.fleet_by, "model_name"),
                "serving",
            ),
        ),
    )
