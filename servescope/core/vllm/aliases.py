"""One logical signal per concept, whatever the engine, version or prefix that exposed it.

vLLM's names changed across versions (gpu_cache_usage_perc -> kv_cache_usage_perc, ...), pipelines
rewrite its `vllm:` prefix (`vllm_`, `kserve_vllm:`, none for NIM), and SGLang / TensorRT-LLM / TGI
name the same concepts differently. This module maps all of them onto one vocabulary; the exported
`servescope_serving_*` series and every dashboard and alert use only that vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from servescope.core.catalog.spec import Kind


@dataclass(frozen=True, slots=True)
class Signal:
    name: str
    shape: Kind  # the same in the engines' exposition as in the normalised series
    aliases: dict[str, tuple[str, ...]]  # backend -> base names, preferred first


SIGNALS: tuple[Signal, ...] = (
    Signal(
        "kv_usage",
        Kind.GAUGE,
        {
            "vllm": ("kv_cache_usage_perc", "gpu_cache_usage_perc"),
            "sglang": ("token_usage",),
            "trtllm": ("kv_cache_utilization",),
        },
    ),
    Signal(
        "running",
        Kind.GAUGE,
        {
            "vllm": ("num_requests_running",),
            "sglang": ("num_running_reqs",),
            "trtllm": ("num_requests_running",),
            "tgi": ("batch_current_size",),
        },
    ),
    Signal(
        "waiting",
        Kind.GAUGE,
        {
            "vllm": ("num_requests_waiting",),
            "sglang": ("num_queue_reqs",),
            "trtllm": ("num_requests_waiting",),
            "tgi": ("queue_size",),
        },
    ),
    Signal(
        "preemptions", Kind.COUNTER, {"vllm": ("num_preemptions",), "sglang": ("num_retracted_requests",)}
    ),
    Signal("prompt_tokens", Kind.COUNTER, {"vllm": ("prompt_tokens",), "sglang": ("prompt_tokens",)}),
    Signal(
        "generation_tokens", Kind.COUNTER, {"vllm": ("generation_tokens",), "sglang": ("generation_tokens",)}
    ),
    Signal(
        "prefix_cache_queries", Kind.COUNTER, {"vllm": ("prefix_cache_queries", "gpu_prefix_cache_queries")}
    ),
    Signal("prefix_cache_hits", Kind.COUNTER, {"vllm": ("prefix_cache_hits", "gpu_prefix_cache_hits")}),
    Signal("requests_finished", Kind.COUNTER, {"vllm": ("request_success",)}),
    Signal(
        "ttft",
        Kind.HISTOGRAM,
        {
            "vllm": ("time_to_first_token_seconds",),
            "sglang": ("time_to_first_token_seconds",),
            "trtllm": ("time_to_first_token_seconds",),
        },
    ),
    Signal(
        "itl",
        Kind.HISTOGRAM,
        {
            "vllm": ("inter_token_latency_seconds", "time_per_output_token_seconds"),
            "sglang": ("inter_token_latency_seconds", "time_per_output_token_seconds"),
            "trtllm": ("time_per_output_token_seconds",),
        },
    ),
    Signal(
        "e2e",
        Kind.HISTOGRAM,
        {
            "vllm": ("e2e_request_latency_seconds",),
            "sglang": ("e2e_request_latency_seconds",),
            "trtllm": ("e2e_request_latency_seconds",),
            "tgi": ("request_duration",),
        },
    ),
    Signal("queue_time", Kind.HISTOGRAM, {"vllm": ("request_queue_time_seconds",)}),
    Signal("prefill_time", Kind.HISTOGRAM, {"vllm": ("request_prefill_time_seconds",)}),
    Signal("decode_time", Kind.HISTOGRAM, {"vllm": ("request_decode_time_seconds",)}),
    Signal("iteration_tokens", Kind.HISTOGRAM, {"vllm": ("iteration_tokens_total",)}),
    Signal("cache_config", Kind.GAUGE, {"vllm": ("cache_config_info",)}),
    Signal("sglang_used_tokens", Kind.GAUGE, {"sglang": ("num_used_tokens",)}),
)

# Prefix -> backend. Longest first: "kserve_vllm:" must win over a bare name.
PREFIXES: tuple[tuple[str, str], ...] = (
    ("kserve_vllm:", "vllm"),
    ("vllm:", "vllm"),
    ("vllm_", "vllm"),
    ("sglang:", "sglang"),
    ("trtllm_", "trtllm"),
    ("tgi_", "tgi"),
)
_BY_BASE: dict[tuple[str, str], tuple[Signal, int]] = {
    (backend, base): (signal, rank)
    for signal in SIGNALS
    for backend, bases in signal.aliases.items()
    for rank, base in enumerate(bases)
}
_VLLM_BASES = {base for (backend, base) in _BY_BASE if backend == "vllm"}


class SampleLike(Protocol):
    """A parsed sample: ours (core.exposition) or prometheus_client's."""

    @property
    def name(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def value(self) -> float: ...


class FamilyLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def documentation(self) -> str: ...
    @property
    def samples(self) -> Sequence[SampleLike]: ...


def split_name(family: str) -> tuple[str, str] | None:
    """(backend, base name) of a family we understand, else None. NIM serves vLLM's names unprefixed."""
    for prefix, backend in PREFIXES:
        if family.startswith(prefix):
            return backend, family[len(prefix) :]
    base = family.removesuffix("_total")
    if family in _VLLM_BASES or base in _VLLM_BASES:
        return "vllm", family
    return None


def is_engine_family(name: str) -> bool:
    """A family worth keeping from a scrape: anything with an engine prefix (for pass-through too)."""
    return split_name(name) is not None


def is_read(name: str) -> bool:
    """A family servescope reads (normalises): all a scrape keeps when nothing is passed through."""
    split = split_name(name)
    return split is not None and lookup(*split) is not None


def lookup(backend: str, base: str) -> tuple[Signal, int] | None:
    # Counters are grouped without their _total by the parser, but an exposition without TYPE
    # lines keeps it: accept both spellings.
    return _BY_BASE.get((backend, base)) or _BY_BASE.get((backend, base.removesuffix("_total")))
