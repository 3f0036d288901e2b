"""promtool cases for the GPU failures the first GPU cases do not cover: node-wide NVML loss, XIDs
asking for a recovery action and drain-when-convenient XIDs. An XID kept until the reset is in
test_rules_xid_kept.py.

1 min samples and evaluations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.alerts.inputs import GPU1, xid_description, xid_event
from tests.alerts.promtool import GPU, ON_GPU, TARGET, case, check, fires, run_promtool, series

# --- a node whose NVML fails as a whole (driver gone): every GPU series vanishes, the exporter answers --
NVML_LOST = "ServescopeGpuNodeNvmlLost"  # for 1m
NODE = {"instance": "node-a:9108", "hostname": "node-a"}
NODE_B = {**TARGET, "instance": "node-b:9108"}
NODE_B_GPU = {**NODE_B, "gpu": "0", "uuid": "GPU-0100", "hostname": "node-b"}
NVML_LOST_DESCRIPTION = (
    "node-a (node-a:9108) had 2 GPUs in the last 6h and reports none now, while its exporter answers: "
    "NVML fails node-wide (driver not loaded, driver/library version mismatch, every GPU gone)."
)
NVML_LOST_CASE = case(
    NVML_LOST,
    [
        # node-a: two GPUs until 9m, none from 10m to 29m, back at 30m; its exporter answers throughout.
        *(series("servescope_gpu_up", gpu, "1x9 stale _x19 1x10") for gpu in (GPU, GPU1)),
        series("up", TARGET, "1x40"),
        # node-b: its GPU series go because the whole exporter went (ServescopeExporterDown's case).
        series("servescope_gpu_up", NODE_B_GPU, "1x9 stale"),
        series("up", NODE_B, "1x9 0x30"),
    ],
    check(NVML_LOST, "9m"),
    check(NVML_LOST, "10m"),  # pending
    fires(NVML_LOST, "11m", NODE, NVML_LOST_DESCRIPTION),
    fires(NVML_LOST, "29m", NODE, NVML_LOST_DESCRIPTION),
    check(NVML_LOST, "31m"),
)

# --- XIDs 63/92: a warning, drain when convenient (for 1m) ----------------------------------------------
DRAIN = "ServescopeGpuXidDrainSoon"
XID = "ServescopeGpuXidCritical"
XID_63 = {**GPU, "xid": "63"}
DRAIN_CASE = case(
    DRAIN,
    xid_event(XID_63, "_x5 1x40", "_x5 300x40"),
    check(DRAIN, "4m"),
    check(DRAIN, "5m"),  # pending
    fires(
        DRAIN,
        "6m",
        XID_63,
        f"{ON_GPU} reported XID 63 in the last 10m (kept 24h after): memory rows were retired or "
        "remapped, or single-bit errors are frequent; drain and reset it in a quiet hour.",
    ),
    check(XID, "6m"),  # not a page
    check(XID, "30m"),
)


# XIDs 154 (the driver says the GPU needs a recovery action) and 46 (GPU stopped processing): pages.
def _recovery_case(xid: str, why: str) -> dict[str, Any]:
    labels = {**GPU, "xid": xid}
    return case(
        f"{XID}: XID {xid}, {why}",
        xid_event(labels, "_x5 1x20", "_x5 300x20"),
        check(XID, "5m"),  # pending
        fires(XID, "6m", labels, xid_description(xid)),
        check(DRAIN, "6m"),  # not a drain-when-convenient XID
    )


CASES: list[dict[str, Any]] = [
    NVML_LOST_CASE,
    DRAIN_CASE,
    _recovery_case("154", "recovery action needed"),
    _recovery_case("46", "GPU stopped processing"),
]


@pytest.mark.e2e
def test_gpu_failures(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)
