"""Derived series: memory curves and trends, leak verdicts, KV headroom, the batch-size advice.

Kept apart from the collected series of `catalog.py`; the catalog lists both.
"""

from __future__ import annotations

from servescope.core.catalog.spec import GPU_LABELS, MetricSpec
from servescope.core.catalog.spec import counter as _counter
from servescope.core.catalog.spec import gauge as _gauge

G = GPU_LABELS
P = (*GPU_LABELS, "pid")
S = ("model_name", "engine", "endpoint")
WINDOWS = {"5m": 300.0, "30m": 1800.0}

# --- memory curves (1 s samples kept in a ring per GPU and per compute process) -----------------
MEMORY_PEAK = _gauge(
    "servescope_gpu_memory_used_peak_bytes",
    "Largest 1 s sample of device memory used over the last --memory-peak-window seconds (default 60): "
    "a spike between two 15-30 s scrapes still shows here.",
    G,
    "derived",
)
MEMORY_MIN = _gauge(
    "servescope_gpu_memory_used_min_bytes",
    "Smallest 1 s sample of device memory used over the last --memory-peak-window seconds.",
    G,
    "derived",
)
MEMORY_GROWTH = _gauge(
    "servescope_gpu_memory_growth_bytes_per_second",
    "Growth of device memory used over the window (5m, 30m): Theil-Sen slope of 1 s samples, robust to "
    "an allocator's sawtooth. Absent until the history covers half the window.",
    (*G, "window"),
    "derived",
)
MEMORY_EXHAUSTION = _gauge(
    "servescope_gpu_memory_exhaustion_seconds",
    "Seconds until memory used reaches the usable total (used + free) at the window's growth rate; "
    "+Inf when memory is not growing.",
    (*G, "window"),
    "derived",
)
LEAK_SUSPECTED = _gauge(
    "servescope_gpu_memory_leak_suspected",
    "1 when memory used grew steadily over the last 30 min (at least 4 min of history) while the serving "
    "load (tokens/s of the engines on this GPU, else GPU utilisation) and KV usage stayed flat; "
    "/api/v1/gpus/<gpu>/memory says why.",
    G,
    "derived",
)
PROCESS_MEMORY_PEAK = _gauge(
    "servescope_gpu_process_memory_used_peak_bytes",
    "Largest 1 s sample of one compute process's device memory over the peak window.",
    P,
    "derived",
)
PROCESS_MEMORY_GROWTH = _gauge(
    "servescope_gpu_process_memory_growth_bytes_per_second",
    "Growth of one compute process's device memory over the window (Theil-Sen slope, as for the GPU).",
    (*P, "window"),
    "derived",
)
PROCESS_LEAK_SUSPECTED = _gauge(
    "servescope_gpu_process_memory_leak_suspected",
    "1 when one compute process's memory grew steadily over the last 30 min while its GPU's serving "
    "load and KV usage stayed flat (same rule as the GPU's).",
    P,
    "derived",
)
HISTORY_BYTES = _gauge(
    "servescope_memory_history_bytes",
    "Bytes held by the 1 s sample rings (fixed per ring: 16 bytes x retention seconds).",
    (),
    "derived",
)

# --- serving engines -----------------------------------------------------------------------------
KV_FREE_TOKENS = _gauge(
    "servescope_serving_kv_cache_free_tokens",
    "KV cache tokens still free: capacity x (1 - usage).",
    S,
    "derived",
)
KV_FREE_REQUESTS = _gauge(
    "servescope_serving_kv_cache_free_requests",
    "Max-length requests that still fit in the free KV cache: free tokens / max_model_len "
    "(max_model_len = kv_cache_size_tokens / kv_cache_max_concurrency, stated by vLLM 0.11+; absent "
    "when the engine does not state them).",
    S,
    "derived",
)
KV_SATURATION = _gauge(
    "servescope_serving_kv_cache_saturation_seconds",
    "Seconds until KV usage reaches 100% at its 5 min trend (Theil-Sen); +Inf when not rising.",
    S,
    "derived",
)
MEMORY_OVER_BUDGET = _gauge(
    "servescope_serving_memory_over_budget_bytes",
    "Device memory held by the engine's processes on this GPU minus gpu_memory_utilization x total: "
    "positive means memory outside the engine's budget (a leak or fragmentation outside the KV pool). "
    "A fragmentation ratio needs the allocator's own statistics, which no external exporter can read.",
    (*S, "gpu", "uuid"),
    "derived",
)
RECOMMENDED_MAX_NUM_SEQS = _gauge(
    "servescope_serving_recommended_max_num_seqs",
    "The operators' batch controller, one step per window (recommendation only; nothing is changed): "
    "x0.8 when window P99 latency is over the SLO, x1.2 when GPU utilisation is under the low threshold, "
    "else kept; bounded to [1, --advisor-max-seqs]. reason names the rule that applied.",
    (*S, "reason"),
    "derived",
)
API_REJECTED = _counter(
    "servescope_api_rejected_requests_total",
    "JSON/SVG API requests refused, by route and reason (unknown GPU, bad window).",
    ("route", "reason"),
    "derived",
)

DERIVED: tuple[MetricSpec, ...] = tuple(v for v in list(globals().values()) if isinstance(v, MetricSpec))
