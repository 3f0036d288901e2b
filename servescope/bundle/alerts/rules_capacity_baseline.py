"""The production daily baseline: an engine's output tokens/s per GPU against a day and a week ago.

Throughput per GPU is only comparable at comparable load: an engine that generates less because fewer
requests came is not slower. So the alert compares with a baseline only where the running batch (its
5-minute mean) is within 20 % of the batch at that baseline time, and at least one request ran then.
It fires when tokens/s per GPU is more than `capacity_regression_drop` (10 %) below the 1-day baseline at
comparable load, and below the 7-day one too where a week of history exists, for an hour: a regression
a deployment brought (a new engine version, flags, a driver). The weekly knee (rules_capacity_regression)
shares that definition: the same load served worse by more than that share.
"""

from __future__ import annotations

from servescope.bundle.alerts.exprs import engine_gpus
from servescope.bundle.alerts.model import ENGINE_KEYS, Alert, Group, Record
from servescope.core import catalog as c
from servescope.core.config import AlertsConfig
from servescope.core.topology import podmonitor, sel

# In the PodMonitor topology the pod is the unit, as where other rules join engines onto GPUs: the
# kubelet's allocation says which GPUs the pod holds, not which of them each data-parallel rank uses.
# `instance` is the node there and `endpoint` the pod's URL. A rollout renames the pod, so a new pod
# compares with a baseline only once it is a day old (the exporter topology keeps its engine keys).
EXPORTER_BY = "job, instance, model_name, engine, endpoint"
POD_BY = "instance, namespace, pod, model_name, endpoint"
POD_KEYS = ("instance", "namespace", "pod", "model_name", "endpoint")
TOKENS_PER_GPU = "engine:servescope_generation_tokens_per_gpu:rate5m"
RUNNING_AVG = "engine:servescope_requests_running:avg5m"
LOAD_TOLERANCE = 0.2  # how far the running batch may differ from the baseline's and still compare
MIN_RUNNING = 1  # a baseline with less than one request running on average says nothing
FOR = "1h"


def below_baseline(offset: str, by: str, drop: float) -> str:
    """Engines whose tokens/s per GPU is `drop` below `offset` ago, at a running batch within tolerance."""
    on = f"on ({by})"
    then_running = f"({RUNNING_AVG} offset {offset})"
    return (
        f"({TOKENS_PER_GPU} < {1 - drop:g} * ({TOKENS_PER_GPU} offset {offset})"
        f" and {on} (abs({RUNNING_AVG} - {then_running}) <= {LOAD_TOLERANCE:g} * {then_running})"
        f" and {on} ({then_running} >= {MIN_RUNNING:g}))"
    )


def subject(cfg: AlertsConfig) -> str:
    """What the description names: the engine, or (PodMonitor topology) the pod, by labels it keeps."""
    if podmonitor(cfg):
        return (
            "{{ $labels.model_name }} pod {{ $labels.namespace }}/{{ $labels.pod }} on {{ $labels.instance }}"
        )
    return "{{ $labels.model_name }} engine {{ $labels.engine }} on {{ $labels.instance }}"


def capacity_baseline(cfg: AlertsConfig) -> Group:
    """Records of throughput per GPU and load, and the alert on a drop against both baselines."""
    by = POD_BY if podmonitor(cfg) else EXPORTER_BY
    drop = cfg.capacity_regression_drop  # the definition the weekly knee shares (core/config_capacity.py)
    tokens = f"sum by ({by}) (rate({sel(cfg, c.GENERATION_TOKENS.name)}[5m]))"
    # Distinct GPUs: an engine with two PIDs on a GPU has two info series for it.
    gpus = f"count by ({by}) (max by ({by}, uuid) ({engine_gpus(cfg)}))"
    per_gpu = f"{tokens} / on ({by}) {gpus}"
    running = f"avg by ({by}) (avg_over_time({sel(cfg, c.RUNNING.name)}[5m]))"
    no_week = f"({TOKENS_PER_GPU} unless on ({by}) ({TOKENS_PER_GPU} offset 7d))"
    return Group(
        "servescope-capacity-baseline",
        (
            Record(TOKENS_PER_GPU, per_gpu),
            Record(RUNNING_AVG, running),
            Alert(
                "ServescopeThroughputBelowBaseline",
                f"{below_baseline('1d', by, drop)} and on ({by}) ({below_baseline('7d', by, drop)} or "
                f"on ({by}) {no_week})",
                FOR,
                "warning",
                "An engine's output tokens/s per GPU is below its daily baseline at comparable load.",
                f"{subject(cfg)} has generated over {drop:.0%} fewer tokens per second per GPU than a "
                f"day ago (and a week ago) for {FOR}, with the same running batch: the engine got "
                "slower, not the traffic lighter.",
                POD_KEYS if podmonitor(cfg) else ENGINE_KEYS,
                "serving",
            ),
        ),
    )
