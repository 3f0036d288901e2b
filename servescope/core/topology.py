"""Where the rules read the engines' series from: the exporter's, or (PodMonitor topology) the engines' own.

In the `exporter` topology the exporter scrapes the engines and exports the normalised
`servescope_serving_*` series. In the `podmonitor` topology Prometheus scrapes vLLM itself: the same
signals are the engines' `vllm:*` series (vLLM 0.32 names), selected by `engine_selector`; a signal the
exporter derives (gpu_memory_utilization, the derived series) has no such series and stays the
exporter's, absent in that topology.
"""

from __future__ import annotations

from servescope.core import catalog as c
from servescope.core.config import AlertsConfig

VLLM_NAMES = {
    c.KV_USAGE.name: "vllm:kv_cache_usage_perc",
    c.RUNNING.name: "vllm:num_requests_running",
    c.WAITING.name: "vllm:num_requests_waiting",
    c.PREEMPTIONS.name: "vllm:num_preemptions_total",
    c.PROMPT_TOKENS.name: "vllm:prompt_tokens_total",
    c.GENERATION_TOKENS.name: "vllm:generation_tokens_total",
    c.REQUESTS_FINISHED.name: "vllm:request_success_total",
    c.TTFT.name: "vllm:time_to_first_token_seconds",
    c.ITL.name: "vllm:inter_token_latency_seconds",
    c.E2E.name: "vllm:e2e_request_latency_seconds",
    c.ITERATION_TOKENS.name: "vllm:iteration_tokens_total",
}
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


def podmonitor(cfg: AlertsConfig) -> bool:
    """Whether Prometheus scrapes the engines itself (their series are vllm:*, joined on namespace, pod)."""
    return cfg.engine_topology == "podmonitor"


def source(cfg: AlertsConfig, name: str) -> tuple[str, str]:
    """The series name and the selector a rule reads `name` (a servescope name) through."""
    if not podmonitor(cfg):
        return name, cfg.selector
    if name in VLLM_NAMES:
        return VLLM_NAMES[name], cfg.engine_selector
    for suffix in HISTOGRAM_SUFFIXES:
        base = name.removesuffix(suffix)
        if base != name and base in VLLM_NAMES:
            return VLLM_NAMES[base] + suffix, cfg.engine_selector
    return name, cfg.selector


def sel(config: AlertsConfig, name: str, *matchers: str) -> str:
    """`name{<exporter selector>,<matchers>}`, or the engine's own series in the PodMonitor topology."""
    series, selector = source(config, name)
    inner = ",".join(m for m in (selector, *matchers) if m)
    return f"{series}{{{inner}}}"
