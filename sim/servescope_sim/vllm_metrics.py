"""What a vLLM engine records, and how its `/metrics` shows it, in two generations of names.

`current` is vLLM 0.33's set (as served by 0.32, shared/samples/vllm-0.32-cpu-idle.txt); `legacy` is the
set of about 0.8/0.9 (`gpu_cache_usage_perc`, `gpu_prefix_cache_*`, `time_per_output_token_seconds`).
The families are prometheus_client's, as in vLLM; `MetricsText` renders them byte for byte as its
`generate_latest` does (a test compares the two), faster. The simulated server, the mock OpenAI server,
the tests and the benchmarks all render through it.
Not simulated: `estimated_*_per_gpu_total` (MFU estimates), `admission_rejections_total` (needs queue
limits; it also carries no engine label), spec-decode counters, and the http_/process_/python_ families.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Literal, Protocol

from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from servescope.exporter.exposition import escape_help, escape_label_value
from servescope_sim.engine_config import EngineConfig
from servescope_sim.engine_stats import EngineStats, Histogram

Generation = Literal["current", "legacy"]
GENERATIONS: tuple[Generation, ...] = ("current", "legacy")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Engine(Protocol):
    """What the rendering reads of an engine: the simulated one (vllm_engine.py) or the mock OpenAI
    server's queue (mock_server.py)."""

    engine_id: str
    model_name: str
    config: EngineConfig
    stats: EngineStats

    @property
    def num_running(self) -> int: ...
    @property
    def num_waiting(self) -> int: ...
    @property
    def kv_cache_usage(self) -> float: ...


_HISTOGRAMS = (
    ("request_prompt_tokens", "Number of prefill tokens processed."),
    ("request_generation_tokens", "Number of generation tokens processed."),
    ("iteration_tokens_total", "Histogram of number of tokens per engine_step."),
    ("request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens."),
    ("request_params_n", "Histogram of the n request parameter."),
    ("request_params_max_tokens", "Histogram of the max_tokens request parameter."),
    ("time_to_first_token_seconds", "Histogram of time to first token in seconds."),
    ("inter_token_latency_seconds", "Histogram of inter-token latency in seconds."),
    ("request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request."),
    ("e2e_request_latency_seconds", "Histogram of e2e request latency in seconds."),
    ("request_queue_time_seconds", "Histogram of time spent in WAITING phase for request."),
    ("request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request."),
    ("request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request."),
    ("request_decode_time_seconds", "Histogram of time spent in DECODE phase for request."),
    ("request_num_preemptions", "Histogram of the number of times a request was preempted."),
    (
        "request_prefill_kv_computed_tokens",
        "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
    ),
)
_LEGACY_RENAMES = {
    "inter_token_latency_seconds": (
        "time_per_output_token_seconds",
        "Histogram of time per output token in seconds.",
    )
}
_CURRENT_ONLY = {
    "request_time_per_output_token_seconds",
    "request_num_preemptions",
    "request_prefill_kv_computed_tokens",
}
_WAITING_BY_REASON_HELP = (
    "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; "
    "'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). "
    "Sum of all reasons equals vllm:num_requests_waiting."
)
_SLEEP_HELP = (
    "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
    "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2."
)


class _Families:
    """Builds one engine's metric families, every series labelled with its engine and model name."""

    def __init__(self, engine: Engine) -> None:
        self.labels = {"engine": engine.engine_id, "model_name": engine.model_name}
        self.created = engine.stats.created

    def _series(self, values: float | Mapping[str, float], label: str) -> list[tuple[dict[str, str], float]]:
        if isinstance(values, Mapping):
            return [({**self.labels, label: key}, value) for key, value in values.items()]
        return [(self.labels, values)]

    def gauge(self, name: str, doc: str, values: float | Mapping[str, float], label: str = "") -> Metric:
        family = Metric(f"vllm:{name}", doc, "gauge")
        for labels, value in self._series(values, label):
            family.add_sample(f"vllm:{name}", labels, float(value))
        return family

    def counter(self, name: str, doc: str, values: float | Mapping[str, float], label: str = "") -> Metric:
        family = Metric(f"vllm:{name}", doc, "counter")
        series = self._series(values, label)
        for labels, value in series:
            family.add_sample(f"vllm:{name}_total", labels, float(value))
        for labels, _ in series:
            family.add_sample(f"vllm:{name}_created", labels, self.created)
        return family

    def histogram(self, name: str, doc: str, histogram: Histogram) -> Metric:
        family = Metric(f"vllm:{name}", doc, "histogram")
        for edge, cumulative in histogram.buckets():
            family.add_sample(f"vllm:{name}_bucket", {**self.labels, "le": edge}, cumulative)
        family.add_sample(f"vllm:{name}_count", self.labels, float(histogram.count))
        family.add_sample(f"vllm:{name}_sum", self.labels, histogram.total)
        family.add_sample(f"vllm:{name}_created", self.labels, self.created)
        return family

    def info(self, name: str, doc: str, labels: dict[str, str]) -> Metric:
        family = Metric(f"vllm:{name}", doc, "gauge")
        family.add_sample(f"vllm:{name}", {**labels, **self.labels}, 1.0)
        return family


def _cache_config(engine: Engine, generation: Generation) -> dict[str, str]:
    c = engine.config
    labels = {
        "block_size": str(c.block_size),
        "cache_dtype": "auto",
        "enable_prefix_caching": "True",
        "gpu_memory_utilization": str(c.gpu_memory_utilization),
        "is_attention_free": "False",
        "num_cpu_blocks": "None",
        "num_gpu_blocks": str(c.num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "sliding_window": "None",
    }
    tokens = c.block_size * c.num_gpu_blocks
    if generation == "legacy":
        return {**labels, "prefix_caching_hash_algo": "builtin", "swap_space": "4.0", "cpu_offload_gb": "0.0"}
    return {
        **labels,
        "kv_cache_size_tokens": str(tokens),
        "kv_cache_max_concurrency": repr(tokens / c.max_model_len),
        "prefix_caching_hash_algo": "sha256",
        "user_specified_block_size": "False",
    }


def _scheduler_families(f: _Families, engine: Engine, legacy: bool) -> Iterator[Metric]:
    s = engine.stats
    yield f.gauge(
        "num_requests_running", "Number of requests in model execution batches.", engine.num_running
    )
    yield f.gauge("num_requests_waiting", "Number of requests waiting to be processed.", engine.num_waiting)
    if legacy:
        doc = "GPU KV-cache usage. 1 means 100 percent usage."
        yield f.gauge("gpu_cache_usage_perc", doc, engine.kv_cache_usage)
        doc = "GPU prefix cache {}, in terms of number of {} tokens."
        yield f.counter("gpu_prefix_cache_queries", doc.format("queries", "queried"), s.prefix_queries)
        yield f.counter("gpu_prefix_cache_hits", doc.format("hits", "cached"), s.prefix_hits)
        return
    waiting = {"capacity": engine.num_waiting, "deferred": 0}
    yield f.gauge("num_requests_waiting_by_reason", _WAITING_BY_REASON_HELP, waiting, "reason")
    sleep = {"awake": 1, "weights_offloaded": 0, "discard_all": 0}
    yield f.gauge("engine_sleep_state", _SLEEP_HELP, sleep, "sleep_state")
    yield f.gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", engine.kv_cache_usage)
    doc = "Prefix cache {}, in terms of number of {} tokens."
    yield f.counter("prefix_cache_queries", doc.format("queries", "queried"), s.prefix_queries)
    yield f.counter("prefix_cache_hits", doc.format("hits", "cached"), s.prefix_hits)
    # No KV connector and a text-only model: these stay at zero on a real server too.
    doc = "External prefix cache {} from KV connector cross-instance cache sharing, "
    doc += "in terms of number of {} tokens."
    yield f.counter("external_prefix_cache_queries", doc.format("queries", "queried"), 0)
    yield f.counter("external_prefix_cache_hits", doc.format("hits", "cached"), 0)
    doc = "Multi-modal cache {}, in terms of number of {} items."
    yield f.counter("mm_cache_queries", doc.format("queries", "queried"), 0)
    yield f.counter("mm_cache_hits", doc.format("hits", "cached"), 0)


def _token_families(f: _Families, s: EngineStats, legacy: bool) -> Iterator[Metric]:
    yield f.counter("num_preemptions", "Cumulative number of preemption from the engine.", s.preemptions)
    yield f.counter("prompt_tokens", "Number of prefill tokens processed.", s.prompt_tokens)
    if not legacy:
        computed, cached = s.prompt_tokens - s.cached_prompt_tokens, s.cached_prompt_tokens
        by_source = {"local_compute": computed, "local_cache_hit": cached, "external_kv_transfer": 0}
        yield f.counter("prompt_tokens_by_source", "Number of prompt tokens by source.", by_source, "source")
        yield f.counter("prompt_tokens_cached", "Number of cached prompt tokens (local + external).", cached)
        tiers = {"device": cached, "host": 0, "p2p": 0, "disk": 0, "external_unspecified": 0}
        doc = "Prefix-cache hit tokens by the cache tier that supplied them."
        yield f.counter("prompt_tokens_cached_by_source", doc, tiers, "source")
    yield f.counter("generation_tokens", "Number of generation tokens processed.", s.generation_tokens)
    reasons = {r: n for r, n in s.finished.items() if not legacy or r in ("stop", "length", "abort")}
    yield f.counter(
        "request_success", "Count of successfully processed requests.", reasons, "finished_reason"
    )


def _families(engine: Engine, generation: Generation) -> Iterator[Metric]:
    f, legacy = _Families(engine), generation == "legacy"
    yield from _scheduler_families(f, engine, legacy)
    yield from _token_families(f, engine.stats, legacy)
    for name, doc in _HISTOGRAMS:
        if legacy and name in _CURRENT_ONLY:
            continue
        shown, shown_doc = _LEGACY_RENAMES.get(name, (name, doc)) if legacy else (name, doc)
        yield f.histogram(shown, shown_doc, engine.stats.histograms[name])
    doc = "Information of the LLMEngine CacheConfig"
    yield f.info("cache_config_info", doc, _cache_config(engine, generation))


class EngineCollector(Collector):
    """The engine's families for prometheus_client (`generate_latest` of it is vLLM's own rendering)."""

    def __init__(self, engine: Engine, generation: Generation) -> None:
        self.engine, self.generation = engine, generation

    def collect(self) -> Iterator[Metric]:
        return _families(self.engine, self.generation)


class MetricsText:
    """Renders an engine's /metrics text, byte for byte what prometheus_client's `generate_latest` makes
    of `EngineCollector`, about four times faster: generate_latest rebuilds and escapes every label
    string on every call, while an engine's series keep their names and labels from one scrape to the
    next, so each sample's `name{labels} ` prefix is kept. Hold one per engine (a benchmark scraping
    many engines for hours); `render_metrics` uses a fresh one."""

    def __init__(self) -> None:
        self._prefixes: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}

    def render(self, engine: Engine, generation: Generation = "current") -> str:
        if generation not in GENERATIONS:
            raise ValueError(f"unknown generation {generation!r}; expected one of {', '.join(GENERATIONS)}")
        out: list[str] = []
        for metric in _families(engine, generation):
            name, kind = metric.name, metric.type
            exposed = f"{name}_total" if kind == "counter" else name
            doc = escape_help(metric.documentation)
            out.append(f"# HELP {exposed} {doc}\n# TYPE {exposed} {kind}\n")
            created: list[str] = []
            for sample in metric.samples:
                line = self._prefix(sample.name, sample.labels) + _number(sample.value) + "\n"
                # generate_latest moves `_created` samples into a gauge family of their own, after.
                (created if sample.name.endswith("_created") else out).append(line)
            if created:
                out.append(f"# HELP {name}_created {doc}\n# TYPE {name}_created gauge\n")
                out.extend(created)
        return "".join(out)

    def _prefix(self, name: str, labels: dict[str, str]) -> str:
        # The families build a sample's labels in the same order every time: no need to sort the key.
        key = (name, tuple(labels.items()))
        prefix = self._prefixes.get(key)
        if prefix is None:
            pairs = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in sorted(labels.items()))
            prefix = self._prefixes[key] = f"{name}{{{pairs}}} " if pairs else f"{name} "
        return prefix


def _number(value: float) -> str:
    return floatToGoString(value)  # type: ignore[no-any-return,no-untyped-call]


def render_metrics(engine: Engine, generation: Generation = "current") -> str:
    """The engine's state as vLLM's `/metrics` text (format 0.0.4) in the given generation of names."""
    return MetricsText().render(engine, generation)
