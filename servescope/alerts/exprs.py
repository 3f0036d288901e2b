"""PromQL pieces several rule groups share: label sets, the engine-to-GPU join, saturation, activity."""

from __future__ import annotations

from servescope import catalog as c
from servescope.alerts.config import AlertsConfig
from servescope.alerts.model import sel

GPU_BY = "instance, hostname, gpu, uuid"
ENGINE_BY = "instance, model_name, engine, endpoint"
ON_GPU = "{{ $labels.hostname }} GPU {{ $labels.gpu }} ({{ $labels.uuid }})"
ON_ENGINE = "{{ $labels.model_name }} engine {{ $labels.engine }} at {{ $labels.endpoint }}"
SM_ACTIVE = "servescope_dcgm_sm_active_ratio"


def engine_gpu_info(cfg: AlertsConfig) -> str:
    """servescope_engine_gpu_info with the GPU's hostname joined on (the join series has none)."""
    info = sel(cfg, c.ENGINE_GPU_INFO.name)
    hosts = f"max by (instance, uuid, hostname) ({sel(cfg, c.GPU_INFO.name)})"
    return f"({info} * on (instance, uuid) group_left (hostname) {hosts})"


def on_engine_gpus(cfg: AlertsConfig, engine_expr: str) -> str:
    """An engine-level vector spread onto the GPUs the engine runs on (labels gain gpu, uuid, hostname).

    servescope_engine_gpu_info has one series per (engine, GPU, PID): `max by` folds the PIDs.
    """
    info = engine_gpu_info(cfg)
    spread = f"({engine_expr}) * on ({ENGINE_BY}) group_right () {info}"
    return f"max by ({ENGINE_BY}, hostname, gpu, uuid) ({spread})"


def saturated(cfg: AlertsConfig) -> str:
    """The GPUs whose busy share, averaged over gpu_saturated_window, is over its bound (the value).

    DCGM SM activity (1002) where DCGM reports it, NVML utilisation elsewhere: NVML counts any kernel
    running, so every decoding engine reads ~100%; SM activity tells how much of the GPU works. The
    average means one low sample does not reset `for`.
    """
    w = cfg.gpu_saturated_window
    sm = f"avg_over_time({sel(cfg, SM_ACTIVE)}[{w}])"
    nvml = f"avg_over_time({sel(cfg, c.UTILIZATION.name)}[{w}])"
    return (
        f"(max by ({GPU_BY}) ({sm} > {cfg.gpu_saturated_sm_active_ratio:g})"
        f" or on (instance, uuid) (max by ({GPU_BY}) ({nvml} > {cfg.gpu_saturated_ratio:g})"
        f" unless on (instance, uuid) {sel(cfg, SM_ACTIVE)}))"
    )


def engine_active(cfg: AlertsConfig) -> str:
    """Engines that ran steps in the last 5 min: vLLM's gauges only refresh on a step, so an idle engine
    keeps the KV usage of its last busy moment (vLLM #22545, #29928)."""
    return f"rate({sel(cfg, c.ITERATION_TOKENS.name + '_count')}[5m]) > 0"


def pool_spare(cfg: AlertsConfig, window: str) -> str:
    """Each model pool's spare share: 1 - the mean busy share, over `window`, of the GPUs its engines run on.

    Busy is DCGM SM activity where DCGM reports it, else NVML utilisation (as for saturation). A GPU
    without an engine is no model's capacity until a worker is started on it, so it does not dilute a
    busy pool's figure; a GPU two models share counts in both pools.
    """
    by = ", ".join((*cfg.fleet_by, "instance", "uuid"))
    sm = f"max by ({by}) (avg_over_time({sel(cfg, SM_ACTIVE)}[{window}]))"
    nvml = f"max by ({by}) (avg_over_time({sel(cfg, c.UTILIZATION.name)}[{window}]))"
    busy = f"({sm} or ({nvml} unless on (instance, uuid) {sm}))"
    pools = f"group by ({by}, model_name) ({sel(cfg, c.ENGINE_GPU_INFO.name)})"
    pool_by = ", ".join((*cfg.fleet_by, "model_name"))
    return f"1 - avg by ({pool_by}) ({pools} * on (instance, uuid) group_left () {busy})"
