"""promtool cases for the GPU health alerts (group servescope-gpu-health): a GPU lost, XIDs, ECC errors,
row remapping and clock throttling. NVLink and PCIe are in test_rules_nvlink.py, memory in
test_rules_gpu_memory.py.

Every case runs at a 1 min scrape interval; the hardware counters use a 10 min window (`hardware_window`),
so a counter that stops increasing keeps its alert until the last increase leaves the window.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerts.inputs import xid_description, xid_event
from tests.alerts.promtool import GPU, GPU_BY, ON_GPU, case, check, fires, run_promtool, series

# --- GPU lost (for 1m): up for 5 min, lost from minute 5 to minute 15, back after -------------------
LOST = "ServescopeGpuLost"
GPU_LOST = case(
    LOST,
    [series("servescope_gpu_up", GPU, "1x4 0x10 1x10")],
    check(LOST, "5m"),  # just lost: pending, not firing
    fires(
        LOST,
        "7m",
        GPU,
        f"{ON_GPU} answers no NVML call (lost, reset required or gone from the bus); its engine is down.",
    ),
    check(LOST, "17m"),  # recovered
)

# --- critical XID (for 1m, 10m window) --------------------------------------------------------------
XID = "ServescopeGpuXidCritical"
XID_79 = {**GPU, "xid": "79"}
XID_DESCRIPTION = xid_description("79")
# The exporter creates the (gpu, xid) series at its first event, already at 1: a single XID 79 (fallen
# off the bus) at minute 5 must still page, although increase() sees no change in that series.
XID_FIRST_EVENT = case(
    f"{XID}: first event of an XID",
    xid_event(XID_79, "_x5 1x40", "_x5 300x40"),
    check(XID, "4m"),
    check(XID, "5m"),  # seen at the first scrape after the event: pending
    fires(XID, "6m", XID_79, XID_DESCRIPTION),
    fires(XID, "14m", XID_79, XID_DESCRIPTION),
    # The event left the 10m window; the GPU is still broken: keep_firing_for holds the alert (its end
    # is checked in test_rules_xid_kept, a day later).
    fires(XID, "16m", XID_79, XID_DESCRIPTION),
    fires(XID, "45m", XID_79, XID_DESCRIPTION),
)
# A second XID 79 at minute 20 on a series that already exists (its first event two days before the
# test starts): counted by increase() too.
XID_REPEAT = case(
    f"{XID}: repeated XID",
    xid_event(XID_79, "1x19 2x30", "-172800x19 1200x30"),
    check(XID, "15m"),  # the first event is older than the window and than keep_firing_for
    check(XID, "20m"),
    fires(XID, "21m", XID_79, XID_DESCRIPTION),
    fires(XID, "31m", XID_79, XID_DESCRIPTION),  # kept
)
# XID 13 (graphics engine exception: an application fault, not the GPU's) never pages.
XID_NOT_CRITICAL = case(
    f"{XID}: XID 13 is not critical",
    xid_event({**GPU, "xid": "13"}, "_x5 1x4 2+1x20", "_x5 300x4 600+60x20"),
    check(XID, "6m"),
    check(XID, "15m"),
    check(XID, "25m"),
)

# --- uncorrectable ECC (for 1m, 10m window) -------------------------------------------------------------
ECC = "ServescopeGpuEccUncorrectable"
ECC_VOLATILE = {**GPU, "type": "uncorrected", "scope": "volatile"}


def _ecc(uncorrected: tuple[str, str], corrected: tuple[str, str]) -> list[dict[str, str]]:
    """A GPU's ECC counters: (volatile, aggregate) values of its uncorrected and of its corrected errors."""
    return [
        series("servescope_gpu_ecc_errors_total", {**GPU, "type": kind, "scope": scope}, values)
        for kind, pair in (("uncorrected", uncorrected), ("corrected", corrected))
        for scope, values in zip(("volatile", "aggregate"), pair, strict=True)
    ]


ECC_ERRORS = case(
    ECC,
    # Two uncorrectable errors counted at minute 10; the lifetime (aggregate) counter follows.
    _ecc(uncorrected=("0x9 2x30", "3x9 5x30"), corrected=("0x40", "7x40")),
    check(ECC, "9m"),
    check(ECC, "10m"),  # pending
    fires(ECC, "11m", ECC_VOLATILE, f"{ON_GPU} counted 2 uncorrectable ECC errors in the last 10m."),
    check(ECC, "21m"),  # no new error for 10 min
)
# Corrected (single-bit) errors, however many, are not uncorrectable.
ECC_CORRECTED_ONLY = case(
    f"{ECC}: corrected errors only",
    _ecc(uncorrected=("0x40", "0x40"), corrected=("0+50x40", "9+50x40")),
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
        series("servescope_gpu_remapped_rows_pending", GPU, "0x25"),
    ],
    check(REMAP_FAILED, "5m"),
    fires(REMAP_FAILED, "6m", GPU, f"{ON_GPU} could not remap a failing memory row: the GPU needs service."),
    check(REMAP_FAILED, "17m"),  # serviced
)
REMAP_PENDING = "ServescopeGpuRowRemapPending"  # for 10m
REMAP_PENDING_CASE = case(
    REMAP_PENDING,
    [
        series("servescope_gpu_remapped_rows_pending", GPU, "0x4 1x20 0x10"),
        series("servescope_gpu_remapped_rows_failed", GPU, "0x35"),
    ],
    check(REMAP_PENDING, "14m"),  # pending for 9 min
    fires(
        REMAP_PENDING,
        "15m",
        GPU,
        f"{ON_GPU} has a row remap pending: drain it and reset the GPU when convenient.",
    ),
    check(REMAP_PENDING, "27m"),  # reset done
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
    fires(THERMAL, "15m", GPU_BY, f"{ON_GPU} holds its clocks down for heat (or a hardware slowdown)."),
    check(THERMAL, "27m"),
)
POWER = "ServescopeGpuPowerThrottling"  # for 30m
POWER_CASE = case(
    POWER,
    _reasons({"sw_power_cap": "0x4 1x40 0x20"}, 65),
    check(POWER, "34m"),
    fires(
        POWER,
        "35m",
        GPU_BY,
        f"{ON_GPU} has been held at its power limit: throughput is bounded by power, not by batch size.",
    ),
    check(POWER, "47m"),
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
    THERMAL_CASE,
    POWER_CASE,
]


@pytest.mark.e2e
def test_gpu_alerts(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)
