"""The production daily baseline: an engine's output tokens/s per GPU against a day and a week ago.

Throughput per GPU is only comparable at comparable load: an engine that generates less because fewer
requests came is not slower. So the alert compares with a baseline only where the running batch (its
5-minute mean) is within 20 % of the batch at that baseline time, and at least one request ran then.
It fires when tokens/s per GPU is more than 20 % below the 1-day baseline at comparable load, and below
the 7-day one too where a week of history exists, for an hour: a regression a deployment brought
(a new engine version, flags, a driver), the weekly regression test's question asked of production.
"""

from __future__ import annotations

from servescope import catalog as c
from servescope.alerts.config import AlertsConfig
from servescope.alerts.model import ENGINE_KEYS, Alert, Group, Record, sel
from servescope.alerts.topology import podmonitor
from servescope.catalog.placement import GPU_POD_INFO

# In the PodMonitor topology an engine's own series carry its pod, and the kubelet's allocation
# (servescope_gpu_pod_info) says how many GPUs the pod holds; the pod is the unit there.
EXPORTER_BY = "job, instance, model_name, engine, endpoint"
POD_BY = "namespace, pod, model_name"
TOKENS_PER_GPU = "engine:servescope_generation_tokens_per_gpu:rate5m"
RUNNING_AVG = "engine:servescope_requests_running:avg5m"
DROP = 0.2  # the share below the baseline that counts as a regression
LOAD_TOLERANCE = 0.2  # how far the running batch may differ from the baseline's and still compare
MIN_RUNNING = 1  # a baseline with less than one request running on average says nothing
FOR = "1h"


def below_baseline(offset: str, by: str) -> str:
    """Engines whose tokens/s per GPU is DROP below `offset` ago, at a running batch within tolerance."""
    on = f"on ({by})"
    then_running = f"({RUNNING_AVG} offset {offset})"
    return (
        f"({TOKENS_PER_GPU} < {1 - DROP:g} * ({TOKENS_PER_GPU} offset {offset})"
        f" and {on} (abs({RUNNING_AVG} - {then_running}) <= {LOAD_TOLERANCE:g} * {then_running})"
        f" and {on} ({then_running} >= {MIN_RUNNING:g}))"
    )


def capacity_baseline(cfg: AlertsConfig) -> Group:
    """Records of throughput per GPU and load, and the alert on a drop against both baselines."""
    by = POD_BY if podmonitor(cfg) else EXPORTER_BY
    tokens = f"sum by ({by}) (rate({sel(cfg, c.GENERATION_TOKENS.name)}[5m]))"
    if podmonitor(cfg):
        allocated = f"max by (namespace, pod, uuid) ({sel(cfg, GPU_POD_INFO.name)})"
        pod_gpus = f"count by (namespace, pod) ({allocated})"
        per_gpu = f"{tokens} / on (namespace, pod) group_left () {pod_gpus}"
    else:
        per_gpu = f"{tokens} / on ({by}) count by ({by}) ({sel(cfg, c.ENGINE_GPU_INFO.name)})"
    running = f"avg by ({by}) (avg_over_time({sel(cfg, c.RUNNING.name)}[5m]))"
    no_week = f"({TOKENS_PER_GPU} unless on ({by}) ({TOKENS_PER_GPU} offset 7d))"
    return Group(
        "servescope-capacity-baseline",
        (
            Record(TOKENS_PER_GPU, per_gpu),
            Record(RUNNING_AVG, running),
            Alert(
                "ServescopeThroughputBelowBaseline",
                f"{below_baseline('1d', by)} and on ({by}) ({below_baseline('7d', by)} or on ({by}) "
                f"{no_week})",
                FOR,
                "warning",
                "An engine's output tokens/s per GPU is below its daily baseline at comparable load.",
                "{{ $labels.model_name }} engine {{ $labels.engine }} on {{ $labels.instance }} has "
                f"generated over {DROP:.0%} fewer tokens per second per GPU than a day ago (and a week ago) "
                f"for {FOR}, with the same running batch: the engine got slower, not the traffic lighter.",
                ENGINE_KEYS,
                "serving",
            ),
        ),
    )
