"""promtool cases for the GPU memory alerts (group servescope-gpu-memory), on derived series."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerts.promtool import ENGINE, GPU, GPU_BY, ON_GPU, case, check, firing, run_promtool, series

GIB = 1024**3
TOTAL = 80 * GIB  # an 80 GiB card

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
        firing(HEADROOM, GPU_BY, f"{ON_GPU} keeps only 2.5% of its memory free at the 1 s peak."),
    ),
    check(HEADROOM, "31m"),
)

BUDGET = "ServescopeEngineOverMemoryBudget"  # for 15m, more than 1 GiB over
BUDGET_LABELS = {**ENGINE, "gpu": "0", "uuid": "GPU-0000"}
BUDGET_CASE = case(
    BUDGET,
    # 1 GiB under its budget, then 2 GiB over from minute 5 to minute 30 (engine restarted after).
    [
        series(
            "servescope_serving_memory_over_budget_bytes", BUDGET_LABELS, f"-{GIB}x4 {2 * GIB}x25 -{GIB}x20"
        )
    ],
    check(BUDGET, "19m"),
    check(
        BUDGET,
        "20m",
        firing(
            BUDGET,
            BUDGET_LABELS,
            "deepseek engine 0 at http://10.0.0.1:8000/metrics "
            "holds 2GiB beyond its budget on GPU 0 (GPU-0000).",
        ),
    ),
    check(BUDGET, "31m"),
)

CASES = [
    LEAK_CASE,
    EXHAUSTION_CASE,
    EXHAUSTION_5M_ONLY,
    EXHAUSTION_STEP,
    HEADROOM_CASE,
    BUDGET_CASE,
]


@pytest.mark.e2e
def test_gpu_memory_alerts(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)
