"""The KV cache's daily baseline per engine: the recording rules the KV anomaly alert compares against.

The baseline is kept per engine and node (`hostname`, joined from the node's GPUs), not per `instance`:
where instance is the exporter pod's address, a rollout would reset a day of baseline; the node keeps
loopback endpoints (http://127.0.0.1:8000) of different nodes apart.
"""

from __future__ import annotations

from servescope.bundle.alerts.model import Group, Record
from servescope.core import catalog as c
from servescope.core.config import AlertsConfig
from servescope.core.topology import sel

BASELINE_BY = "job, hostname, model_name, engine, endpoint"
KV_AVG5M = "engine:servescope_kv_cache_usage:avg5m"
KV_AVG1D = "engine:servescope_kv_cache_usage:avg1d"
KV_STDDEV1D = "engine:servescope_kv_cache_usage:stddev1d"


def kv_baseline(cfg: AlertsConfig) -> Group:
    """Recording rules of the KV daily baseline (the anomaly alert compares against them)."""
    hosts = f"on (instance) group_left (hostname) max by (instance, hostname) ({sel(cfg, c.GPU_INFO.name)})"
    kv_5m = f"avg_over_time({sel(cfg, c.KV_USAGE.name)}[5m])"
    return Group(
        "servescope-kv-baseline",
        (
            Record(KV_AVG5M, f"avg by ({BASELINE_BY}) ({kv_5m} * {hosts})"),
            Record(KV_AVG1D, f"avg_over_time({KV_AVG5M}[1d])"),
            Record(KV_STDDEV1D, f"stddev_over_time({KV_AVG5M}[1d])"),
        ),
    )
