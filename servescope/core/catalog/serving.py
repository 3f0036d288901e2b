"""Serving-engine series (vLLM and peers), normalised: the same names whatever the version or backend."""

from __future__ import annotations

from servescope.core.catalog.core import SOURCE_ERRORS, SOURCE_LAST_SUCCESS, SOURCE_UP
from servescope.core.catalog.revision import REVISION_LABEL
from servescope.core.catalog.spec import POD_LABELS, Kind, MetricSpec
from servescope.core.catalog.spec import counter as _counter
from servescope.core.catalog.spec import gauge as _gauge

# namespace/pod/container: the pod holding all of the endpoint's GPUs, when the kubelet says; revision: that
# pod's rollout revision, when the API server says (each omitted when unknown).
S = ("model_name", "engine", "endpoint", *POD_LABELS, REVISION_LABEL)


def _serving_gauge(name: str, help_: str, labels: tuple[str, ...] = S) -> MetricSpec:
    return _gauge(name, help_, labels, "vllm")


def _serving_counter(name: str, help_: str, labels: tuple[str, ...] = S) -> MetricSpec:
    return _counter(name, help_, labels, "vllm")


SOURCE_UP_ENDPOINT = MetricSpec(
    "servescope_source_up", Kind.GAUGE, SOURCE_UP.help, ("source", "endpoint"), "vllm"
)
SOURCE_ERRORS_ENDPOINT = MetricSpec(
    "servescope_source_errors_total",
    Kind.COUNTER,
    SOURCE_ERRORS.help,
    ("source", "endpoint", "reason"),
    "vllm",
)
SOURCE_LAST_SUCCESS_ENDPOINT = MetricSpec(
    "servescope_source_last_success_timestamp_seconds",
    Kind.GAUGE,
    SOURCE_LAST_SUCCESS.help,
    ("source", "endpoint"),
    "vllm",
)
SERVING_ENGINE_INFO = _serving_gauge(
    "servescope_serving_engine_info",
    "The serving backend and metric generation detected at an endpoint (value is always 1).",
    ("endpoint", "backend", "generation"),
)
ENGINE_GPU_INFO = _serving_gauge(
    "servescope_engine_gpu_info",
    "Which GPU a serving engine runs on, from the PIDs listening on its endpoint and their descendants "
    "matched against NVML's compute processes (value is always 1).",
    ("model_name", "engine", "endpoint", "uuid", "gpu", "pid"),
)
KV_USAGE = _serving_gauge("servescope_serving_kv_cache_usage_ratio", "Fraction of the KV cache in use (0-1).")
KV_CAPACITY = _serving_gauge(
    "servescope_serving_kv_cache_capacity_tokens",
    "KV cache capacity in tokens (block_size x num_gpu_blocks from cache_config_info).",
)
GPU_MEMORY_UTILIZATION_SETTING = _serving_gauge(
    "servescope_serving_gpu_memory_utilization_ratio",
    "The engine's configured gpu_memory_utilization: the share of GPU memory it may take.",
)
RUNNING = _serving_gauge("servescope_serving_requests_running", "Requests in the running batch.")
WAITING = _serving_gauge("servescope_serving_requests_waiting", "Requests queued, waiting for the batch.")
PREEMPTIONS = _serving_counter(
    "servescope_serving_preemptions_total",
    "Requests preempted (KV cache exhausted) since the engine started.",
)
PROMPT_TOKENS = _serving_counter("servescope_serving_prompt_tokens_total", "Prompt tokens processed.")
GENERATION_TOKENS = _serving_counter("servescope_serving_generation_tokens_total", "Tokens generated.")
PREFIX_QUERIES = _serving_counter(
    "servescope_serving_prefix_cache_queries_total", "Prefix-cache lookups (in tokens on current vLLM)."
)
PREFIX_HITS = _serving_counter(
    "servescope_serving_prefix_cache_hits_total", "Prefix-cache hits (in tokens on current vLLM)."
)
REQUESTS_FINISHED = _serving_counter(
    "servescope_serving_requests_finished_total",
    "Requests finished, by finished_reason (stop, length, abort...).",
    (*S, "finished_reason"),
)


def _histogram(name: str, help_: str) -> MetricSpec:
    return MetricSpec(name, Kind.HISTOGRAM, help_, S, "vllm")


TTFT = _histogram(
    "servescope_serving_time_to_first_token_seconds", "Time to first token, the engine's buckets."
)
ITL = _histogram("servescope_serving_inter_token_latency_seconds", "Time between output tokens.")
E2E = _histogram("servescope_serving_e2e_request_latency_seconds", "End-to-end request latency.")
QUEUE_TIME = _histogram("servescope_serving_request_queue_time_seconds", "Time requests waited in the queue.")
PREFILL_TIME = _histogram(
    "servescope_serving_request_prefill_time_seconds", "Time requests spent in prefill."
)
DECODE_TIME = _histogram("servescope_serving_request_decode_time_seconds", "Time requests spent decoding.")
ITERATION_TOKENS = _histogram(
    "servescope_serving_iteration_tokens",
    "Tokens per engine step (the batching-efficiency signal); its _count rate is steps/s, not tokens/s.",
)
