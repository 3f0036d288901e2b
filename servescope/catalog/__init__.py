"""The metric catalog: the one list of every series servescope exports.

Dashboards, alerts, runbooks and the README import names from here, so a renamed metric breaks
their build instead of silently matching nothing.
"""

from __future__ import annotations

from servescope.catalog.spec import GPU_LABELS, Kind, MetricSpec
from servescope.catalog.spec import counter as _counter
from servescope.catalog.spec import gauge as _gauge

G = GPU_LABELS

# --- the exporter itself -------------------------------------------------------------------------
BUILD_INFO = _gauge(
    "servescope_build_info",
    "servescope version and Python it runs on (value is always 1).",
    ("version", "python_version"),
    "core",
)
SIMULATED = _gauge(
    "servescope_simulated",
    "1 when this exporter serves a simulated fleet (--simulate), never on real data.",
    (),
    "core",
)
SOURCE_UP = _gauge(
    "servescope_source_up", "1 when the source's last collection succeeded, else 0.", ("source",), "core"
)
SOURCE_LAST_SUCCESS = _gauge(
    "servescope_source_last_success_timestamp_seconds",
    "Unix time of the source's last successful collection (0 before the first).",
    ("source",),
    "core",
)
SOURCE_DURATION = _gauge(
    "servescope_source_collect_duration_seconds",
    "Wall time the source's last collection took.",
    ("source",),
    "core",
)
SOURCE_INTERVAL = _gauge(
    "servescope_source_interval_seconds",
    "Configured collection interval; a source is stale when its last success is older than 3 intervals.",
    ("source",),
    "core",
)
SOURCE_ERRORS = _counter(
    "servescope_source_errors_total",
    "Collection problems by reason; a partial problem (one GPU lost, one field failing) counts "
    "while the source stays up.",
    ("source", "reason"),
    "core",
)
RENDER_DURATION = _gauge(
    "servescope_exposition_render_duration_seconds",
    "Time the last re-render of this exposition took (done in the background, never per scrape).",
    (),
    "core",
)

# --- NVML: one series per GPU --------------------------------------------------------------------
GPU_INFO = _gauge(
    "servescope_gpu_info",
    "Static facts about a GPU (value is always 1). model_name is kept for the served LLM.",
    (*G, "gpu_model", "pci_bus_id", "driver_version", "mig_mode"),
    "nvml",
)
GPU_UP = _gauge(
    "servescope_gpu_up",
    "1 when every lifecycle call to this GPU succeeded in the last cycle; "
    "0 when it is lost, needs a reset or vanished from the bus.",
    G,
    "nvml",
)
GPU_FIELD_SUPPORTED = _gauge(
    "servescope_gpu_field_supported",
    "1 when the field was read from this GPU, 0 when NVML answered NotSupported/NoPermission/"
    "FunctionNotFound (the field's series are then absent, not zero).",
    (*G, "field"),
    "nvml",
)
MEMORY_USED = _gauge(
    "servescope_gpu_memory_used_bytes", "Device memory in use (NVML v2 memory info).", G, "nvml"
)
MEMORY_FREE = _gauge("servescope_gpu_memory_free_bytes", "Device memory free.", G, "nvml")
MEMORY_RESERVED = _gauge(
    "servescope_gpu_memory_reserved_bytes",
    "Device memory reserved by the driver and firmware (absent on drivers without the v2 memory call).",
    G,
    "nvml",
)
MEMORY_TOTAL = _gauge("servescope_gpu_memory_total_bytes", "Device memory installed.", G, "nvml")
UTILIZATION = _gauge(
    "servescope_gpu_utilization_ratio",
    "Fraction of the last sample period (1/6 s to 1 s) in which a kernel ran (0-1). Not on MIG GPUs.",
    G,
    "nvml",
)
MEMORY_UTILIZATION = _gauge(
    "servescope_gpu_memory_utilization_ratio",
    "Fraction of the last sample period in which device memory was read or written (0-1); "
    "bandwidth activity, not capacity.",
    G,
    "nvml",
)
TEMPERATURE = _gauge("servescope_gpu_temperature_celsius", "GPU core temperature.", G, "nvml")
POWER = _gauge("servescope_gpu_power_watts", "Board power draw.", G, "nvml")
POWER_LIMIT = _gauge("servescope_gpu_power_limit_watts", "Enforced power limit.", G, "nvml")
ENERGY = _counter(
    "servescope_gpu_energy_joules_total", "Energy consumed since the driver was loaded.", G, "nvml"
)
CLOCK = _gauge("servescope_gpu_clock_hertz", "Current clock frequency.", (*G, "clock"), "nvml")
CLOCK_EVENT = _gauge(
    "servescope_gpu_clock_event_reason_active",
    "1 while the named clock event (throttle) reason holds clocks down, else 0.",
    (*G, "reason"),
    "nvml",
)
PCIE_REPLAY = _counter(
    "servescope_gpu_pcie_replay_errors_total", "PCIe replay counter (link retransmissions).", G, "nvml"
)
ECC_ERRORS = _counter(
    "servescope_gpu_ecc_errors_total",
    "ECC errors by type (corrected|uncorrected) and scope (volatile: since driver load; "
    "aggregate: lifetime).",
    (*G, "type", "scope"),
    "nvml",
)
RETIRED_PAGES = _gauge(
    "servescope_gpu_retired_pages",
    "Pages retired by cause (pre-Ampere GPUs; Ampere and later remap rows).",
    (*G, "cause"),
    "nvml",
)
RETIRED_PAGES_PENDING = _gauge(
    "servescope_gpu_retired_pages_pending", "1 when a page retirement waits for a reset.", G, "nvml"
)
REMAPPED_ROWS = _gauge(
    "servescope_gpu_remapped_rows",
    "Memory rows remapped, by type (correctable|uncorrectable).",
    (*G, "type"),
    "nvml",
)
REMAPPED_ROWS_PENDING = _gauge(
    "servescope_gpu_remapped_rows_pending", "1 when a row remap waits for a GPU reset.", G, "nvml"
)
REMAPPED_ROWS_FAILED = _gauge(
    "servescope_gpu_remapped_rows_failed", "1 when a row remap failed (the GPU needs service).", G, "nvml"
)
NVLINK_LINKS = _gauge(
    "servescope_gpu_nvlink_links", "NVLink links NVML reports on the GPU (absent without NVLink).", G, "nvml"
)
NVLINK_LINKS_UP = _gauge(
    "servescope_gpu_nvlink_links_up", "NVLink links of the GPU that are active.", G, "nvml"
)
NVLINK_ERRORS = _counter(
    "servescope_gpu_nvlink_errors_total",
    "NVLink data-link errors summed over the GPU's links, by type: crc_flit, crc_data, replay, recovery.",
    (*G, "type"),
    "nvml",
)
NVLINK_UP = _gauge(
    "servescope_gpu_nvlink_up",
    "1 when the NVLink link is active, else 0 (only with --nvlink-per-link).",
    (*G, "link"),
    "nvml",
)
NVLINK_LINK_ERRORS = _counter(
    "servescope_gpu_nvlink_link_errors_total",
    "NVLink data-link errors per link by type (only with --nvlink-per-link).",
    (*G, "link", "type"),
    "nvml",
)
PROCESSES = _gauge("servescope_gpu_compute_processes", "Compute processes running on the GPU.", G, "nvml")
PROCESS_MEMORY = _gauge(
    "servescope_gpu_process_memory_used_bytes",
    "Device memory used by one compute process (host PID namespace).",
    (*G, "pid"),
    "nvml",
)
XID_ERRORS = _counter(
    "servescope_gpu_xid_errors_total",
    "Critical XID events seen since the exporter started, by XID code.",
    (*G, "xid"),
    "nvml",
)
XID_LAST_SEEN = _gauge(
    "servescope_gpu_xid_last_seen_timestamp_seconds",
    "Unix time of the last event of this XID (catches a first event that increase() would miss).",
    (*G, "xid"),
    "nvml",
)

# --- DCGM: fixed series (the per-field series come from the counters file) ------------------------
DCGM_FIELD_SUPPORTED = _gauge(
    "servescope_dcgm_field_supported",
    "1 when dcgmi dmon returned values for the field on this GPU, 0 when it stayed N/A for the "
    "configured number of rows or the host engine refused to watch it.",
    (*G, "field_id"),
    "dcgm",
)
DCGM_RESTARTS = _counter(
    "servescope_dcgm_dmon_restarts_total",
    "Times the dcgmi dmon child was restarted (exited, hung, or its watch list changed).",
    ("reason",),
    "dcgm",
)
DCGM_WATCHED_FIELDS = _gauge(
    "servescope_dcgm_watched_fields", "Fields in the running dcgmi dmon's watch list.", (), "dcgm"
)

# --- serving engines (vLLM and peers), normalised: the same names whatever the version or backend --------
S = ("model_name", "engine", "endpoint")
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
SERVING_ENGINE_INFO = _gauge(
    "servescope_serving_engine_info",
    "The serving backend and metric generation detected at an endpoint (value is always 1).",
    ("endpoint", "backend", "generation"),
    "vllm",
)
ENGINE_GPU_INFO = _gauge(
    "servescope_engine_gpu_info",
    "Which GPU a serving engine runs on, from the PIDs listening on its endpoint and their descendants "
    "matched against NVML's compute processes (value is always 1).",
    ("model_name", "engine", "endpoint", "uuid", "gpu", "pid"),
    "vllm",
)
KV_USAGE = _gauge(
    "servescope_serving_kv_cache_usage_ratio", "Fraction of the KV cache in use (0-1).", S, "vllm"
)
KV_CAPACITY = _gauge(
    "servescope_serving_kv_cache_capacity_tokens",
    "KV cache capacity in tokens (block_size x num_gpu_blocks from cache_config_info).",
    S,
    "vllm",
)
GPU_MEMORY_UTILIZATION_SETTING = _gauge(
    "servescope_serving_gpu_memory_utilization_ratio",
    "The engine's configured gpu_memory_utilization: the share of GPU memory it may take.",
    S,
    "vllm",
)
RUNNING = _gauge("servescope_serving_requests_running", "Requests in the running batch.", S, "vllm")
WAITING = _gauge("servescope_serving_requests_waiting", "Requests queued, waiting for the batch.", S, "vllm")
PREEMPTIONS = _counter(
    "servescope_serving_preemptions_total",
    "Requests preempted (KV cache exhausted) since the engine started.",
    S,
    "vllm",
)
PROMPT_TOKENS = _counter("servescope_serving_prompt_tokens_total", "Prompt tokens processed.", S, "vllm")
GENERATION_TOKENS = _counter("servescope_serving_generation_tokens_total", "Tokens generated.", S, "vllm")
PREFIX_QUERIES = _counter(
    "servescope_serving_prefix_cache_queries_total",
    "Prefix-cache lookups (in tokens on current vLLM).",
    S,
    "vllm",
)
PREFIX_HITS = _counter(
    "servescope_serving_prefix_cache_hits_total", "Prefix-cache hits (in tokens on current vLLM).", S, "vllm"
)
REQUESTS_FINISHED = _counter(
    "servescope_serving_requests_finished_total",
    "Requests finished, by finished_reason (stop, length, abort...).",
    (*S, "finished_reason"),
    "vllm",
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

# Derived signals (memory curves, leaks, KV headroom, the advisor) are listed in their own module.
from servescope.catalog.derived import DERIVED  # noqa: E402
from servescope.catalog.placement import PLACEMENT  # noqa: E402

# Per-endpoint variants share a family with their source-level twin and are not listed twice.
_TWINS = ("SOURCE_UP_ENDPOINT", "SOURCE_ERRORS_ENDPOINT", "SOURCE_LAST_SUCCESS_ENDPOINT")
CATALOG: tuple[MetricSpec, ...] = (
    *(value for key, value in list(globals().items()) if isinstance(value, MetricSpec) and key not in _TWINS),
    *DERIVED,
    *PLACEMENT,
)
BY_NAME: dict[str, MetricSpec] = {spec.name: spec for spec in CATALOG}
if len(BY_NAME) != len(CATALOG):
    raise RuntimeError("metric catalog: duplicate metric names")
