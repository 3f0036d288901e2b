"""The metric catalog: the one list of every series servescope exports.

Dashboards, alerts, runbooks and the README import names from here, so a renamed metric breaks
their build instead of silently matching nothing.
"""

from __future__ import annotations

from servescope.core.catalog.spec import GPU_LABELS, POD_LABELS, MetricSpec
from servescope.core.catalog.spec import counter as _counter
from servescope.core.catalog.spec import gauge as _gauge

G = GPU_LABELS


def _nvml_gauge(name: str, help_: str, labels: tuple[str, ...] = G) -> MetricSpec:
    return _gauge(name, help_, labels, "nvml")


def _nvml_counter(name: str, help_: str, labels: tuple[str, ...] = G) -> MetricSpec:
    return _counter(name, help_, labels, "nvml")


# The sections below live in their own modules; importing them in this order keeps the catalog's order.
from servescope.core.catalog.core import *  # noqa: E402, F403

# --- NVML: one series per GPU --------------------------------------------------------------------
GPU_INFO = _nvml_gauge(
    "servescope_gpu_info",
    "Static facts about a GPU (value is always 1). model_name is kept for the served LLM.",
    (*G, "gpu_model", "pci_bus_id", "driver_version", "mig_mode"),
)
GPU_UP = _nvml_gauge(
    "servescope_gpu_up",
    "1 when every lifecycle call to this GPU succeeded in the last cycle; "
    "0 when it is lost, needs a reset or vanished from the bus.",
)
GPU_FIELD_SUPPORTED = _nvml_gauge(
    "servescope_gpu_field_supported",
    "1 when the field was read from this GPU, 0 when NVML answered NotSupported/NoPermission/"
    "FunctionNotFound (the field's series are then absent, not zero).",
    (*G, "field"),
)
MEMORY_USED = _nvml_gauge("servescope_gpu_memory_used_bytes", "Device memory in use (NVML v2 memory info).")
MEMORY_FREE = _nvml_gauge("servescope_gpu_memory_free_bytes", "Device memory free.")
MEMORY_RESERVED = _nvml_gauge(
    "servescope_gpu_memory_reserved_bytes",
    "Device memory reserved by the driver and firmware (absent on drivers without the v2 memory call).",
)
MEMORY_TOTAL = _nvml_gauge("servescope_gpu_memory_total_bytes", "Device memory installed.")
UTILIZATION = _nvml_gauge(
    "servescope_gpu_utilization_ratio",
    "Fraction of the last sample period (1/6 s to 1 s) in which a kernel ran (0-1). Not on MIG GPUs.",
)
MEMORY_UTILIZATION = _nvml_gauge(
    "servescope_gpu_memory_utilization_ratio",
    "Fraction of the last sample period in which device memory was read or written (0-1); "
    "bandwidth activity, not capacity.",
)
TEMPERATURE = _nvml_gauge("servescope_gpu_temperature_celsius", "GPU core temperature.")
POWER = _nvml_gauge("servescope_gpu_power_watts", "Board power draw.")
POWER_LIMIT = _nvml_gauge("servescope_gpu_power_limit_watts", "Enforced power limit.")
ENERGY = _nvml_counter("servescope_gpu_energy_joules_total", "Energy consumed since the driver was loaded.")
CLOCK = _nvml_gauge("servescope_gpu_clock_hertz", "Current clock frequency.", (*G, "clock"))
CLOCK_EVENT = _nvml_gauge(
    "servescope_gpu_clock_event_reason_active",
    "1 while the named clock event (throttle) reason holds clocks down, else 0.",
    (*G, "reason"),
)
PCIE_REPLAY = _nvml_counter(
    "servescope_gpu_pcie_replay_errors_total", "PCIe replay counter (link retransmissions)."
)
ECC_ERRORS = _nvml_counter(
    "servescope_gpu_ecc_errors_total",
    "ECC errors by type (corrected|uncorrected) and scope (volatile: since driver load; "
    "aggregate: lifetime).",
    (*G, "type", "scope"),
)
RETIRED_PAGES = _nvml_gauge(
    "servescope_gpu_retired_pages",
    "Pages retired by cause (pre-Ampere GPUs; Ampere and later remap rows).",
    (*G, "cause"),
)
RETIRED_PAGES_PENDING = _nvml_gauge(
    "servescope_gpu_retired_pages_pending", "1 when a page retirement waits for a reset."
)
REMAPPED_ROWS = _nvml_gauge(
    "servescope_gpu_remapped_rows", "Memory rows remapped, by type (correctable|uncorrectable).", (*G, "type")
)
REMAPPED_ROWS_PENDING = _nvml_gauge(
    "servescope_gpu_remapped_rows_pending", "1 when a row remap waits for a GPU reset."
)
REMAPPED_ROWS_FAILED = _nvml_gauge(
    "servescope_gpu_remapped_rows_failed", "1 when a row remap failed (the GPU needs service)."
)
NVLINK_LINKS = _nvml_gauge(
    "servescope_gpu_nvlink_links", "NVLink links NVML reports on the GPU (absent without NVLink)."
)
NVLINK_LINKS_UP = _nvml_gauge("servescope_gpu_nvlink_links_up", "NVLink links of the GPU that are active.")
NVLINK_ERRORS = _nvml_counter(
    "servescope_gpu_nvlink_errors_total",
    "NVLink data-link errors summed over the GPU's links, by type: crc_flit, crc_data, replay, recovery.",
    (*G, "type"),
)
NVLINK_UP = _nvml_gauge(
    "servescope_gpu_nvlink_up",
    "1 when the NVLink link is active, else 0 (only with --nvlink-per-link).",
    (*G, "link"),
)
NVLINK_LINK_ERRORS = _nvml_counter(
    "servescope_gpu_nvlink_link_errors_total",
    "NVLink data-link errors per link by type (only with --nvlink-per-link).",
    (*G, "link", "type"),
)
PROCESSES = _nvml_gauge("servescope_gpu_compute_processes", "Compute processes running on the GPU.")
PROCESS_MEMORY = _nvml_gauge(
    "servescope_gpu_process_memory_used_bytes",
    "Device memory used by one compute process (host PID namespace); namespace/pod/container where one "
    "container holds the GPU (kubelet pod-resources).",
    (*G, "pid", *POD_LABELS),
)
XID_ERRORS = _nvml_counter(
    "servescope_gpu_xid_errors_total",
    "Critical XID events seen since the exporter started, by XID code.",
    (*G, "xid"),
)
XID_LAST_SEEN = _nvml_gauge(
    "servescope_gpu_xid_last_seen_timestamp_seconds",
    "Unix time of the last event of this XID (catches a first event that increase() would miss).",
    (*G, "xid"),
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

# Derived signals (memory curves, leaks, KV headroom, the advisor) are listed in their own module.
from servescope.core.catalog.bounds import BOUNDS  # noqa: E402
from servescope.core.catalog.derived import DERIVED  # noqa: E402
from servescope.core.catalog.pcie import PCIE_LINK  # noqa: E402
from servescope.core.catalog.placement import PLACEMENT  # noqa: E402
from servescope.core.catalog.serving import *  # noqa: E402, F403

# Per-endpoint variants share a family with their source-level twin and are not listed twice.
_TWINS = ("SOURCE_UP_ENDPOINT", "SOURCE_ERRORS_ENDPOINT", "SOURCE_LAST_SUCCESS_ENDPOINT")
CATALOG: tuple[MetricSpec, ...] = (
    *(value for key, value in list(globals().items()) if isinstance(value, MetricSpec) and key not in _TWINS),
    *DERIVED,
    *PCIE_LINK,
    *PLACEMENT,
    *BOUNDS,
)
BY_NAME: dict[str, MetricSpec] = {spec.name: spec for spec in CATALOG}
if len(BY_NAME) != len(CATALOG):
    raise RuntimeError("metric catalog: duplicate metric names")
