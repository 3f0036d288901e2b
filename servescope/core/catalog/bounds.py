"""What the exporter refused or could not reach: engine series over the limits, DCGM entities NVML does
not know, and the outcome of discovery for each GPU process. Each says out loud what would otherwise be
lost without a trace."""

from __future__ import annotations

from servescope.core.catalog.spec import MetricSpec
from servescope.core.catalog.spec import counter as _counter
from servescope.core.catalog.spec import gauge as _gauge

SERIES_DROPPED = _counter(
    "servescope_vllm_series_dropped_total",
    "Samples of an endpoint's page dropped by the exporter's limits, by reason: series_limit (more "
    "samples than --vllm-max-series), label_value_length (a label value longer than "
    "--vllm-max-label-length), label_values_limit (a label with more distinct values in one family than "
    "--vllm-max-label-values).",
    ("endpoint", "reason"),
    "vllm",
)
DISCOVERY_GPU_PROCESSES = _gauge(
    "servescope_vllm_discovery_gpu_processes",
    "NVML's GPU processes in discovery's last cycle, by outcome: scraped (its engine's endpoint answers), "
    "not_an_engine (no serving engine in its process tree: left alone), pid_not_visible (not in this "
    "exporter's /proc: no hostPID, or it exited), or why its engine is not scraped: ptrace_denied, "
    "loopback_only, no_reachable_address, ipv6_only, v6only_listener (the exporter cannot reach it from "
    "where it runs), no_listener, not_metrics (the engine does not serve /metrics, yet or at all).",
    ("reason",),
    "vllm",
)
DCGM_ENTITIES_DROPPED = _counter(
    "servescope_dcgm_entities_dropped_total",
    "DCGM rows dropped because NVML does not know their GPU on this node (reason unknown_gpu), or because "
    "the exporter already holds as many GPUs as it accepts without NVML (reason over_cap).",
    ("reason",),
    "dcgm",
)

BOUNDS: tuple[MetricSpec, ...] = (SERIES_DROPPED, DISCOVERY_GPU_PROCESSES, DCGM_ENTITIES_DROPPED)
