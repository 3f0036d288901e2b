"""PromQL pieces several rule groups share: label sets, the engine-to-GPU join, saturation, activity."""

from __future__ import annotations

from servescope.bundle.alerts.model import ENGINE_KEYS, GPU_KEYS
from servescope.core import catalog as c
from servescope.core.catalog.placement import GPU_POD_INFO
from servescope.core.config import AlertsConfig
from servescope.core.topology import podmonitor, sel

# The labels that tell a GPU and an engine apart (the alerts' keys), as a PromQL label list.
GPU_BY = ", ".join(GPU_KEYS)
ENGINE_BY = ", ".join(ENGINE_KEYS)
# An engine scraped by a PodMonitor: its pod tells it apart (two pods of a node serve engine 0 of the same
# model); `instance` is the node's name as on the GPU series; `endpoint` is the pod's URL (the PodMonitor
# sets it) and names the engine in the annotations.
POD_ENGINE_BY = "instance, namespace, pod, model_name, engine, endpoint"
POD_GPU_BY = "instance, namespace, pod, hostname, gpu, uuid"
ON_GPU = "{{ $labels.hostname }} GPU {{ $labels.gpu }} ({{ $labels.uuid }})"
ON_ENGINE = "{{ $labels.model_name }} engine {{ $labels.engine }} at {{ $labels.endpoint }}"
SM_ACTIVE = "servescope_dcgm_sm_active_ratio"
# An alert that compares with a daily baseline waits until the baseline spans (almost) a day: on a younger
# series the daily figures describe a few hours only, and every change of load (the first busy morning)
# reads as an anomaly.
BASELINE_MIN_AGE = "23h"


def gpu_hosts(cfg: AlertsConfig) -> str:
    """Each GPU's hostname, from its info series (value 1): joined onto series that carry none."""
    return f"max by (instance, uuid, hostname) ({sel(cfg, c.GPU_INFO.name)})"


def engine_gpu_info(cfg: AlertsConfig) -> str:
    """servescope_engine_gpu_info with the GPU's hostname joined on (the join series has none)."""
    info = sel(cfg, c.ENGINE_GPU_INFO.name)
    return f"({info} * on (instance, uuid) group_left (hostname) {gpu_hosts(cfg)})"


def engine_by(cfg: AlertsConfig) -> str:
    """The labels that identify an engine in the topology the bundle is built for."""
    return POD_ENGINE_BY if podmonitor(cfg) else ENGINE_BY


def on_pod_gpus(cfg: AlertsConfig, engine_expr: str) -> str:
    """An engine-level vector spread onto the GPUs the kubelet allocated to its pod, joined on
    `namespace, pod` (labels gain gpu, uuid, hostname; `engine` goes).

    Prometheus cannot tell which GPUs of a pod each of its data-parallel ranks holds, so the pod is the
    unit: its engines fold into one value (the highest), never a cross product of ranks and GPUs. A TP
    group is one engine on the pod's N GPUs. servescope_gpu_pod_info has one series per container holding
    a GPU: `max by` folds the containers.
    """
    per_pod = f"max by (namespace, pod, model_name, endpoint) ({engine_expr})"
    gpus = f"max by ({POD_GPU_BY}) ({sel(cfg, GPU_POD_INFO.name)})"
    return f"({per_pod} * on (namespace, pod) group_right (model_name, endpoint) {gpus})"


def on_engine_gpus(cfg: AlertsConfig, engine_expr: str) -> str:
    """An engine-level vector spread onto the GPUs the engine runs on (labels gain gpu, uuid, hostname).

    servescope_engine_gpu_info has one series per (engine, GPU, PID): `max by` folds the PIDs.
    """
    if podmonitor(cfg):
        return on_pod_gpus(cfg, engine_expr)
    info = engine_gpu_info(cfg)
    spread = f"({engine_expr}) * on ({ENGINE_BY}) group_right () {info}"
    return f"max by ({ENGINE_BY}, hostname, gpu, uuid) ({spread})"


def engine_gpus(cfg: AlertsConfig) -> str:
    """The GPUs each engine runs on (one or more series per engine and GPU, with its uuid).

    servescope_engine_gpu_info has one series per (engine, GPU, PID); in the PodMonitor topology the
    engine's pod holds the GPUs the kubelet allocated to it. Fold per GPU before counting.
    """
    if podmonitor(cfg):
        return on_pod_gpus(cfg, sel(cfg, c.RUNNING.name))
    return sel(cfg, c.ENGINE_GPU_INFO.name)


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
    pools = f"group by ({by}, model_name) ({engine_gpus(cfg)})"
    pool_by = ", ".join((*cfg.fleet_by, "model_name"))
    return f"1 - avg by ({pool_by}) ({pools} * on (instance, uuid) group_left () {busy})"
