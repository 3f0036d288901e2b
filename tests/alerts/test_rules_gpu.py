"""promtool cases for the GPU health and GPU memory alerts (groups servescope-gpu-health, -gpu-memory).

Every case runs at a 1 min scrape interval; the hardware counters use a 10 min window (`hardware_window`),
so a counter that stops increasing keeps its alert until the last increase leaves the window.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerts.promtool import ENGINE, GPU, case, check, firing, run_promtool, series

ON_GPU = "node-a GPU 0 (GPU-0000)"
# What `sum by`/`max by (instance, hostname, gpu, uuid)` keeps of a GPU's labels.
GPU_BY = {k: GPU[k] for k in ("instance", "hostname", "gpu", "uuid")}
GPU1 = {**GPU, "gpu": "1", "uuid": "GPU-0001"}
GIB = 1024**3
TOTAL = 80 * GIB  # an 80 GiB card


def _zeros(name: str, labels: dict[str, str], minutes: int = 60) -> dict[str, str]:
    """A series the exporter reports every cycle that stays 0 (a quiet counter or an inactive flag)."""
    return series(name, labels, f"0x{minutes}")


# --- GPU lost (for 1m): up for 5 min, lost from minute 5 to minute 15, back after -------------------
LOST = "ServescopeGpuLost"
GPU_LOST = case(
    LOST,
    [series("servescope_gpu_up", GPU, "1x4 0x10 1x10")],
    check(LOST, "5m"),  # just lost: pending, not firing
    check(
        LOST,
        "7m",
        firing(
            LOST,
            GPU,
            f"{ON_GPU} answers no NVML call (lost, reset required or gone from the bus); its engine is down.",
        ),
    ),
    check(LOST, "17m"),  # recovered
)

# --- critical XID (for 1m, 10m window) --------------------------------------------------------------
XID = "ServescopeGpuXidCritical"
XID_79 = {**GPU, "xid": "79"}
XID_DESCRIPTION = (
    f"{ON_GPU} reported XID 79 in the last 10m (kept 24h after: the GPU stays broken until it is reset); "
    "servescope_gpu_xid_last_seen_timestamp_seconds says when."
)
# The exporter creates the (gpu, xid) series at its first event, already at 1: a single XID 79 (fallen
# off the bus) at minute 5 must still page, although increase() sees no change in that series.
XID_FIRST_EVENT = case(
    f"{XID}: first event of an XID",
    [
        series("servescope_gpu_xid_errors_total", XID_79, "_x5 1x40"),
        series("servescope_gpu_xid_last_seen_timestamp_seconds", XID_79, "_x5 300x40"),
    ],
    check(XID, "4m"),
    check(XID, "5m"),  # seen at the first scrape after the event: pending
    check(XID, "6m", firing(XID, XID_79, XID_DESCRIPTION)),
    check(XID, "14m", firing(XID, XID_79, XID_DESCRIPTION)),
    # The event left the 10m window; the GPU is still broken: keep_firing_for holds the alert (its end
    # is checked in test_rules_gpu_failures, a day later).
    check(XID, "16m", firing(XID, XID_79, XID_DESCRIPTION)),
    check(XID, "45m", firing(XID, XID_79, XID_DESCRIPTION)),
)
# A second XID 79 at minute 20 on a series that already exists (its first event two days before the
# test starts): counted by increase() too.
XID_REPEAT = case(
    f"{XID}: repeated XID",
    [
        series("servescope_gpu_xid_errors_total", XID_79, "1x19 2x30"),
        series("servescope_gpu_xid_last_seen_timestamp_seconds", XID_79, "-172800x19 1200x30"),
    ],
    check(XID, "15m"),  # the first event is older than the window and than keep_firing_for
    check(XID, "20m"),
    check(XID, "21m", firing(XID, XID_79, XID_DESCRIPTION)),
    check(XID, "31m", firing(XID, XID_79, XID_DESCRIPTION)),  # kept
)
# XID 13 (graphics engine exception: an application fault, not the GPU's) never pages.
XID_NOT_CRITICAL = case(
    f"{XID}: XID 13 is not critical",
    [
        series("servescope_gpu_xid_errors_total", {**GPU, "xid": "13"}, "_x5 1x4 2+1x20"),
        series("servescope_gpu_xid_last_seen_timestamp_seconds", {**GPU, "xid": "13"}, "_x5 300x4 600+60x20"),
    ],
    check(XID, "6m"),
    check(XID, "15m"),
    check(XID, "25m"),
)

# --- uncorrectable ECC (for 1m, 10m window) -------------------------------------------------------------
ECC = "ServescopeGpuEccUncorrectable"
ECC_VOLATILE = {**GPU, "type": "uncorrected", "scope": "volatile"}
ECC_ERRORS = case(
    ECC,
    [
        # Two uncorrectable errors counted at minute 10; the lifetime (aggregate) counter follows.
        series("servescope_gpu_ecc_errors_total", ECC_VOLATILE, "0x9 2x30"),
        series("servescope_gpu_ecc_errors_total", {**ECC_VOLATILE, "scope": "aggregate"}, "3x9 5x30"),
        series("servescope_gpu_ecc_errors_total", {**GPU, "type": "corrected", "scope": "volatile"}, "0x40"),
        series("servescope_gpu_ecc_errors_total", {**GPU, "type": "corrected", "scope": "aggregate"}, "7x40"),
    ],
    check(ECC, "9m"),
    check(ECC, "10m"),  # pending
    check(
        ECC, "11m", firing(ECC, ECC_VOLATILE, f"{ON_GPU} counted 2 uncorrectable ECC errors in the last 10m.")
    ),
    check(ECC, "21m"),  # no new error for 10 min
)
# Corrected (single-bit) errors, however many, are not uncorrectable.
ECC_CORRECTED_ONLY = case(
    f"{ECC}: corrected errors only",
    [
        series("servescope_gpu_ecc_errors_total", ECC_VOLATILE, "0x40"),
        series("servescope_gpu_ecc_errors_total", {**ECC_VOLATILE, "scope": "aggregate"}, "0x40"),
        series(
            "servescope_gpu_ecc_errors_total", {**GPU, "type": "corrected", "scope": "volatile"}, "0+50x40"
        ),
        series(
            "servescope_gpu_ecc_errors_total", {**GPU, "type": "corrected", "scope": "aggregate"}, "9+50x40"
        ),
    ],
    check(ECC, "5m"),
    check(ECC, "20m"),
    check(ECC, "40m"),
)

# --- row remapping (gauges, 0/1) -------------------------------------------------------------------------
REMAP_FAILED = "ServescopeGpuRowRemapFailed"  # for 1m
REMAP_FAILED_CASE = case(
    REMAP_FAILED,
    [
        series("servescope_gpu_remapped_rows_failed", GPU, "0x4 1x10 0x10"),
        _zeros("servescope_gpu_remapped_rows_pending", GPU, 25),
    ],
    check(REMAP_FAILED, "5m"),
    check(
        REMAP_FAILED,
        "6m",
        firing(REMAP_FAILED, GPU, f"{ON_GPU} could not remap a failing memory row: the GPU needs service."),
    ),
    check(REMAP_FAILED, "17m"),  # serviced
)
REMAP_PENDING = "ServescopeGpuRowRemapPending"  # for 10m
REMAP_PENDING_CASE = case(
    REMAP_PENDING,
    [
        series("servescope_gpu_remapped_rows_pending", GPU, "0x4 1x20 0x10"),
        _zeros("servescope_gpu_remapped_rows_failed", GPU, 35),
    ],
    check(REMAP_PENDING, "14m"),  # pending for 9 min
    check(
        REMAP_PENDING,
        "15m",
        firing(
            REMAP_PENDING,
            GPU,
            f"{ON_GPU} has a row remap pending: drain it and reset the GPU when convenient.",
        ),
    ),
    check(REMAP_PENDING, "27m"),  # reset done
)

# --- NVLink (for 10m, more than 10 events per 10m window on one GPU) -------------------------------------
NVLINK = "servescope_gpu_nvlink_errors_total"
DCGM_FLIT = "servescope_dcgm_nvlink_crc_flit_errors_total"
DCGM_DATA = "servescope_dcgm_nvlink_crc_data_errors_total"
# One error a minute on each of two series from minute 10 to minute 30, flat before and after: the 10m
# increase summed over the GPU exceeds 10 from minute 16 (pending), fires at 26, ends by 36.
BURST = "0x10 1+1x19 20x20"
QUIET = "0x50"


def _links(kinds: dict[str, str], labels: dict[str, str] = GPU) -> list[dict[str, str]]:
    """The NVML error series of a GPU (one per type, summed over its links); `kinds` gives those not QUIET."""
    return [
        series(NVLINK, {**labels, "type": kind}, kinds.get(kind, QUIET))
        for kind in ("crc_flit", "crc_data", "replay", "recovery")
    ]


CRC = "ServescopeNvlinkCrcErrors"


def _crc_description(count: int) -> str:
    return (
        f"{ON_GPU} counted {count} NVLink CRC errors in the last 10m (NVML summed over links, else DCGM "
        "fields 409/419, 1206/1209 on NVLink5, or 497; not 1009/1010, which are PCIe bytes)."
    )


# NVML and DCGM (also running) both count the same errors summed over links: counted once.
CRC_NVML = case(
    f"{CRC}: NVML counters",
    [
        *_links({"crc_flit": BURST, "crc_data": BURST}),
        series(DCGM_FLIT, GPU, BURST),
        series(DCGM_DATA, GPU, BURST),
    ],
    check(CRC, "16m"),  # 12 errors in 10m: pending (`for: 1m`)
    check(CRC, "17m", firing(CRC, GPU_BY, _crc_description(14))),
    check(CRC, "26m", firing(CRC, GPU_BY, _crc_description(20))),
    check(CRC, "37m"),  # 6 left in the window
)
# NVML reports no NVLink error counters (NotSupported): DCGM's 409 + 419 stand in.
CRC_DCGM = case(
    f"{CRC}: DCGM fallback",
    [series(DCGM_FLIT, GPU, BURST), series(DCGM_DATA, GPU, BURST)],
    check(CRC, "16m"),
    check(CRC, "17m", firing(CRC, GPU_BY, _crc_description(14))),
    check(CRC, "26m", firing(CRC, GPU_BY, _crc_description(20))),
    check(CRC, "37m"),
)
# GPU 0: 3 flit errors every 5 min, counted by NVML (link 0) and by DCGM (summed over links): 6 per
# window, not 12. GPU 1: a few errors at once (5), then exactly the threshold, 10 per window, not above it.
STEADY_6 = " ".join(str(3 * (minute // 5)) for minute in range(51))
CRC_UNDER = case(
    f"{CRC}: under the threshold",
    [
        *_links({"crc_flit": STEADY_6}),
        series(DCGM_FLIT, GPU, STEADY_6),
        series(DCGM_DATA, GPU, QUIET),
        *_links({"crc_flit": "0x10 5x10 6+1x29"}, GPU1),
        series(DCGM_FLIT, GPU1, "0x10 5x10 6+1x29"),
        series(DCGM_DATA, GPU1, QUIET),
    ],
    check(CRC, "11m"),
    check(CRC, "20m"),
    check(CRC, "30m"),
    check(CRC, "45m"),
)

REPLAY = "ServescopeNvlinkReplayRecovery"
REPLAY_DESCRIPTION = f"{ON_GPU} counted 20 NVLink replay/recovery events in the last 10m."
REPLAY_CASE = case(
    REPLAY,
    _links({"replay": BURST, "recovery": BURST}),
    check(REPLAY, "16m"),
    check(REPLAY, "25m"),
    check(REPLAY, "26m", firing(REPLAY, GPU_BY, REPLAY_DESCRIPTION)),
    check(REPLAY, "37m"),
)

# --- PCIe replays (for 10m, more than 10 per 10m window) ------------------------------------------------
PCIE = "ServescopePcieReplays"
PCIE_CASE = case(
    PCIE,
    [series("servescope_gpu_pcie_replay_errors_total", GPU, "40x10 42+2x19 80x20")],
    check(PCIE, "16m"),
    check(PCIE, "25m"),
    check(PCIE, "26m", firing(PCIE, GPU, f"{ON_GPU} retransmitted 20 PCIe packets in the last 10m.")),
    check(PCIE, "37m"),
)

# --- clock event reasons (one 0/1 series per reason) -----------------------------------------------------
REASONS = (
    "gpu_idle",
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)
CLOCK = "servescope_gpu_clock_event_reason_active"


def _reasons(active: dict[str, str], minutes: int) -> list[dict[str, str]]:
    return [series(CLOCK, {**GPU, "reason": r}, active.get(r, f"0x{minutes}")) for r in REASONS]


THERMAL = "ServescopeGpuThermalThrottling"  # for 10m
THERMAL_CASE = case(
    THERMAL,
    # Hardware thermal slowdown from minute 5 to 25, the software one overlapping: one alert per GPU.
    _reasons({"hw_thermal_slowdown": "0x4 1x20 0x20", "sw_thermal_slowdown": "0x9 1x10 0x25"}, 45),
    check(THERMAL, "14m"),
    check(
        THERMAL,
        "15m",
        firing(THERMAL, GPU_BY, f"{ON_GPU} holds its clocks down for heat (or a hardware slowdown)."),
    ),
    check(THERMAL, "27m"),
)
POWER = "ServescopeGpuPowerThrottling"  # for 30m
POWER_CASE = case(
    POWER,
    _reasons({"sw_power_cap": "0x4 1x40 0x20"}, 65),
    check(POWER, "34m"),
    check(
        POWER,
        "35m",
        firing(
            POWER,
            GPU_BY,
            f"{ON_GPU} has been held at its power limit: throughput is bounded by power, not by batch size.",
        ),
    ),
    check(POWER, "47m"),
)

# --- GPU memory (derived series) -------------------------------------------------------------------------
LEAK = "ServescopeGpuMemoryLeakSuspected"  # for 10m
LEAK_CASE = case(
    LEAK,
    [series("servescope_gpu_memory_leak_suspected", GPU, "0x4 1x20 0x10")],
    check(LEAK, "14m"),
    check(
        LEAK,
        "15m",
        firing(
            LEAK,
            GPU,
            f"{ON_GPU}: memory has grown steadily for 30 minutes while tokens/s "
            "and KV usage stayed flat; /api/v1/gpus on the exporter gives the rate and the "
            "reason.",
        ),
    ),
    check(LEAK, "27m"),
)

EXHAUSTION = "ServescopeGpuMemoryExhaustionSoon"  # for 5m, window="30m" below 3600 s
EXHAUST_30M = {**GPU, "window": "30m"}
EXHAUST_5M = {**GPU, "window": "5m"}
INF = " ".join(["Inf"] * 10)
EXHAUSTION_CASE = case(
    EXHAUSTION,
    [
        # Not growing for 10 min (+Inf), then 50 min left and counting down, then fixed at minute 25.
        series("servescope_gpu_memory_exhaustion_seconds", EXHAUST_30M, f"{INF} 3000-60x14 {INF} {INF}"),
        series("servescope_gpu_memory_exhaustion_seconds", EXHAUST_5M, f"{INF} 2000-40x14 {INF} {INF}"),
    ],
    check(EXHAUSTION, "14m"),
    check(
        EXHAUSTION,
        "15m",
        firing(EXHAUSTION, EXHAUST_30M, f"{ON_GPU} will run out of memory in 45m 0s at its 30m growth rate."),
    ),
    check(EXHAUSTION, "27m"),
)
# A 5 minute spike in growth (15 min left at that rate) while the 30 min trend gives 2 h: no page.
EXHAUSTION_5M_ONLY = case(
    f"{EXHAUSTION}: 5m window alone",
    [
        series("servescope_gpu_memory_exhaustion_seconds", EXHAUST_30M, "7200x40"),
        series("servescope_gpu_memory_exhaustion_seconds", EXHAUST_5M, "900x40"),
    ],
    check(EXHAUSTION, "10m"),
    check(EXHAUSTION, "30m"),
)
# Load jumped 20 min ago and activations grew 2.6 GiB at once: the 30 min trend still reads the step as
# growth (47 min left), the 5 min trend has gone flat. Not a leak, no page.
EXHAUSTION_STEP = case(
    f"{EXHAUSTION}: a one-off step the 5m window has left behind",
    [
        series("servescope_gpu_memory_exhaustion_seconds", EXHAUST_30M, "2800x40"),
        series("servescope_gpu_memory_exhaustion_seconds", EXHAUST_5M, " ".join(["Inf"] * 41)),
    ],
    check(EXHAUSTION, "10m"),
    check(EXHAUSTION, "30m"),
)

HEADROOM = "ServescopeGpuMemoryHeadroomLow"  # for 15m, free share at the 1 s peak below 5%
HEADROOM_TAIL = " (under 5%, or under 50% of what its engine's gpu_memory_utilization leaves free)."
HEADROOM_CASE = case(
    HEADROOM,
    [
        series("servescope_gpu_memory_total_bytes", GPU, f"{TOTAL}x50"),
        # 90% used (vLLM's default budget) is fine; 78 GiB (2.5% free) from minute 5 to minute 30.
        series(
            "servescope_gpu_memory_used_peak_bytes",
            GPU,
            f"{TOTAL * 9 // 10}x4 {78 * GIB}x25 {TOTAL * 9 // 10}x20",
        ),
    ],
    check(HEADROOM, "19m"),
    check(
        HEADROOM,
        "20m",
        firing(
            HEADROOM, GPU_BY, f"{ON_GPU} keeps only 2.5% of its memory free at the 1 s peak{HEADROOM_TAIL}"
        ),
    ),
    check(HEADROOM, "31m"),
)

BUDGET = "ServescopeEngineOverMemoryBudget"  # for 15m, more than 1 GiB over
BUDGET_LABELS = {**ENGINE, "hostname": "node-a", "gpu": "0", "uuid": "GPU-0000"}
GPU_FACTS = {"gpu_model": "H100", "pci_bus_id": "0000:18:00.0", "driver_version": "550", "mig_mode": "0"}
BUDGET_CASE = case(
    BUDGET,
    # 1 GiB under its budget, then 2 GiB over from minute 5 to minute 30 (engine restarted after).
    [
        series(
            "servescope_serving_memory_over_budget_bytes",
            {**ENGINE, "gpu": "0", "uuid": "GPU-0000"},
            f"-{GIB}x4 {2 * GIB}x25 -{GIB}x20",
        ),
        series("servescope_gpu_info", {**GPU, **GPU_FACTS}, "1x50"),
    ],
    check(BUDGET, "19m"),
    check(
        BUDGET,
        "20m",
        firing(
            BUDGET,
            BUDGET_LABELS,
            "deepseek engine 0 at http://10.0.0.1:8000/metrics "
            "holds 2GiB beyond its budget on GPU 0 (GPU-0000), more than 3% of the budget and 1 GiB.",
        ),
    ),
    check(BUDGET, "31m"),
)

CASES = [
    GPU_LOST,
    XID_FIRST_EVENT,
    XID_REPEAT,
    XID_NOT_CRITICAL,
    ECC_ERRORS,
    ECC_CORRECTED_ONLY,
    REMAP_FAILED_CASE,
    REMAP_PENDING_CASE,
    CRC_NVML,
    CRC_DCGM,
    CRC_UNDER,
    REPLAY_CASE,
    PCIE_CASE,
    THERMAL_CASE,
    POWER_CASE,
    LEAK_CASE,
    EXHAUSTION_CASE,
    EXHAUSTION_5M_ONLY,
    EXHAUSTION_STEP,
    HEADROOM_CASE,
    BUDGET_CASE,
]


@pytest.mark.e2e
def test_gpu_alerts(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)
