"""promtool cases of the serving alerts on raw series (group servescope-serving): saturation, KV pressure
alone and with a saturated GPU, queues, preemptions, an underused GPU while requests wait.

The fleet buffer is in test_rules_fleet.py, the KV daily baseline in test_rules_kv_baseline.py.
1 min samples and evaluations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.alerts.promtool import case, check, fires, run_promtool, series, series_of
from tests.alerts.serving import (
    COMBINED,
    COMBINED_A,
    ENGINE_A,
    ENGINE_B,
    ENGINE_C,
    GPU0,
    GPU0_BY,
    GPU1,
    HURTING,
    HURTING_A,
    KV,
    KV_PRESSURE,
    ON_A,
    ON_B,
    PLACEMENT,
    RUNNING,
    STEPS,
    TTFT_BURN_FROM_3M,
    UTIL,
    WAITING,
    engine_on_gpu,
    engine_page,
    kv_pressure_text,
    node_gpu_facts,
    stepping,
    ttft,
)

PREEMPTIONS = "servescope_serving_preemptions_total"

# --- ServescopeGpuSaturated (10m average > 85% for 10m) -------------------------------------------------
SATURATED = "ServescopeGpuSaturated"
SATURATED_TEXT = (
    "node-a GPU 0 (GPU-0000) has been busy {pct} on average over 10m (DCGM SM activity where reported, else "
    "NVML utilisation): shed or queue load by priority now, add workers (3-5 min)."
)
SATURATED_95 = SATURATED_TEXT.format(pct="95%")
SATURATED_CASE = case(
    SATURATED,
    [
        # GPU 0: 50% until minute 4, 95% from minute 5 to 29, 30% from minute 30. The 10m average (11
        # samples) is over 85% from 13m ((2 x 0.5 + 9 x 0.95) / 11 = 86.8%) to 30m (10 x 0.95 + 0.3).
        series(UTIL, GPU0, "0.5x4 0.95x24 0.3x10"),
        # GPU 1 sits exactly on the threshold: `> 0.85` never holds.
        series(UTIL, GPU1, "0.85x40"),
    ],
    check(SATURATED, "22m"),  # over since 13m: pending for 9m
    fires(SATURATED, "23m", GPU0_BY, SATURATED_95),
    check(SATURATED, "32m"),  # the average fell under 85% at 31m
)
# One 80% reading every 9 minutes used to reset `for` on the raw gauge; the average stays at ~93.6%.
# And where DCGM reports SM activity, it decides: GPU 1's NVML reads 99% while its SMs are 50% active.
DIPS = " ".join("0.8" if minute % 9 == 8 else "0.95" for minute in range(41))
# (10 x 0.95 + 0.8) / 11 = 93.64% over each 10m window with one dip
DIPS_DESCRIPTION = SATURATED_TEXT.format(pct="93.64%")
SATURATED_DIPS = case(
    f"{SATURATED}: dips and SM activity",
    [
        series(UTIL, GPU0, DIPS),
        series(UTIL, GPU1, "0.99x40"),
        series("servescope_dcgm_sm_active_ratio", GPU1, "0.5x40"),
    ],
    check(SATURATED, "9m"),  # true from 0m: pending
    fires(SATURATED, "30m", GPU0_BY, DIPS_DESCRIPTION),
    fires(SATURATED, "40m", GPU0_BY, DIPS_DESCRIPTION),
)

# --- ServescopeKvCachePressure (> 70% for 5m) -----------------------------------------------------------
KV_PRESSURE_CASE = case(
    KV_PRESSURE,
    [
        # Engine A: 50%, then 80% from minute 5 to 14, 60% from minute 15.
        series(KV, ENGINE_A, "0.5x4 0.8x9 0.6x10"),
        # Engine B exactly on the threshold: silent.
        series(KV, ENGINE_B, "0.7x25"),
        stepping(ENGINE_A, 25),
        stepping(ENGINE_B, 25),
        # Engine C holds 90% after its requests were aborted, idle (no step): vLLM's gauges froze.
        series(KV, ENGINE_C, "0.9x25"),
        series(STEPS, ENGINE_C, "500x25"),
    ],
    check(KV_PRESSURE, "9m"),  # pending for 4m
    fires(KV_PRESSURE, "10m", ENGINE_A, kv_pressure_text(ON_A, 80)),
    check(KV_PRESSURE, "16m"),  # 60% since 15m
)

# --- ServescopeGpuSaturatedKvPressure (both on the same GPU, for 5m) -----------------------------------


def _saturated_gpu0(kv_a: str, kv_b: str) -> list[dict[str, str]]:
    """GPU 0 saturated throughout, GPU 1 at 40%; engines A (on GPU 0) and B (on GPU 1) at the KV given."""
    utilisation = [series(UTIL, GPU0, "0.95x40"), series(UTIL, GPU1, "0.4x40")]
    return [*utilisation, series(KV, ENGINE_A, kv_a), series(KV, ENGINE_B, kv_b), *PLACEMENT]


# Engine A at 90% KV from minute 5 to 14, engine B at 50%.
ONE_GPU = _saturated_gpu0("0.5x4 0.9x9 0.5x20", "0.5x40")
COMBINED_CASES = [
    # GPU 0 saturated (engine A's GPU) while the KV pressure is on engine B (GPU 1): each single alert fires,
    # the combined one stays silent.
    case(
        f"{COMBINED} on different GPUs",
        _saturated_gpu0("0.5x30", "0.9x30"),
        check(COMBINED, "10m"),
        check(COMBINED, "20m"),
        fires(SATURATED, "20m", GPU0_BY, SATURATED_95),
        fires(KV_PRESSURE, "20m", ENGINE_B, kv_pressure_text(ON_B, 90)),
    ),
    # One ticket (engine A's two PIDs fold), about engine A on its node; nothing for engine B.
    case(
        f"{COMBINED} on one GPU",
        ONE_GPU,
        check(COMBINED, "9m"),  # both hold since 5m: pending for 4m
        fires(COMBINED, "10m", engine_page(ENGINE_A), COMBINED_A),
        check(COMBINED, "16m"),  # KV back to 50% at 15m
        check(HURTING, "10m"),  # the TTFT objective holds: no page
    ),
    # The same while the model's TTFT budget burns (half its requests over 0.5 s from minute 3, the fast
    # windows over 14.4x from minute 5): the page, about engine A, the cause it names. Engine B has
    # neither KV pressure nor a saturated GPU.
    case(
        f"{HURTING}: KV pressure while the TTFT budget burns",
        [*ONE_GPU, *ttft(ENGINE_A, TTFT_BURN_FROM_3M)],
        check(HURTING, "6m"),  # pending since 5m
        fires(HURTING, "7m", engine_page(ENGINE_A), HURTING_A),
        # KV back to 50% at 15m: the page stays 15 minutes (keep_firing_for), then resolves.
        fires(HURTING, "29m", engine_page(ENGINE_A), HURTING_A),
        check(HURTING, "30m"),
    ),
    # An idle engine whose KV gauge froze at 90% (no step since) on a saturated GPU: no alert.
    case(
        f"{COMBINED}: idle engine with a frozen KV gauge",
        [
            series(UTIL, GPU0, "0.95x30"),
            series(KV, ENGINE_A, "0.9x30"),
            series(STEPS, ENGINE_A, "700x30"),
            *PLACEMENT[:3],
            node_gpu_facts(GPU0),
        ],
        check(COMBINED, "10m"),
        check(COMBINED, "20m"),
        check(KV_PRESSURE, "20m"),
    ),
]

# --- ServescopeRequestQueueBuilding (> 5 waiting and more waiting than running, for 10m) -----------------
QUEUE = "ServescopeRequestQueueBuilding"


QUEUE_CASE = case(
    QUEUE,
    [
        # Engine A: 12 waiting for 8 running from minute 5 to 19, 3 waiting from minute 20.
        *series_of(ENGINE_A, {WAITING: "2x4 12x14 3x10", RUNNING: "8x30"}),
        # Engine B: 12 waiting but 16 running: the batch keeps up, silent.
        *series_of(ENGINE_B, {WAITING: "12x30", RUNNING: "16x30"}),
    ],
    check(QUEUE, "14m"),  # pending for 9m
    fires(QUEUE, "15m", ENGINE_A, f"{ON_A} has 12 requests waiting, more than 1 per running request."),
    check(QUEUE, "21m"),
)

# --- ServescopePreemptionsSustained (rate[5m] > 0.1/s for 15m) -----------------------------------------
PREEMPT = "ServescopePreemptionsSustained"
# rate at 21m: (960 - 660) / 300 s = 1.00/s
PREEMPT_A = f"{ON_A} preempts 1.00 requests/s: the KV cache is too small for the batch."
PREEMPT_CASE = case(
    PREEMPT,
    [
        # Engine A: 0 until minute 5, then +60 a minute (1/s) from minute 6 to 25 (60 ... 1200), flat after.
        # rate at 6m = (60 - 0) / 300 s = 0.2 > 0.1: pending from 6m, firing from 21m.
        # The last increase is at 25m; the window [t-5m, t] holds it until 29m: rate 0 from 30m.
        series(PREEMPTIONS, ENGINE_A, "0x5 60+60x19 1200x15"),
        # Engine B: +3 a minute = 0.05/s, under the threshold.
        series(PREEMPTIONS, ENGINE_B, "0+3x40"),
    ],
    check(PREEMPT, "20m"),  # pending for 14m
    fires(PREEMPT, "21m", ENGINE_A, PREEMPT_A),
    check(PREEMPT, "31m"),
)

# --- ServescopeGpuUnderutilisedWhileQueued (waiting > 0 while its GPU < 50% busy, for 10m) -------------
UNDER = "ServescopeGpuUnderutilisedWhileQueued"
UNDER_CASE = case(
    UNDER,
    [
        *(series(UTIL, gpu, busy) for gpu, busy in ((GPU0, "0.3x30"), (GPU1, "0.9x30"))),
        # Engine A (GPU 0 at 30%): 7 waiting from minute 5 to 19. One alert although it has two PIDs.
        series(WAITING, ENGINE_A, "0x4 7x14 0x10"),
        # Engine B also has requests waiting, but its GPU 1 is 90% busy: silent.
        series(WAITING, ENGINE_B, "7x30"),
        *PLACEMENT,
    ],
    check(UNDER, "14m"),  # pending for 9m
    fires(
        UNDER,
        "15m",
        engine_on_gpu(ENGINE_A, GPU0),
        f"{ON_A} has 7 requests waiting while GPU 0 is under 50% busy: raise max_num_seqs "
        "(see servescope_serving_recommended_max_num_seqs).",
    ),
    check(UNDER, "21m"),
)

CASES: list[dict[str, Any]] = [
    SATURATED_CASE,
    SATURATED_DIPS,
    KV_PRESSURE_CASE,
    *COMBINED_CASES,
    QUEUE_CASE,
    PREEMPT_CASE,
    UNDER_CASE,
]


@pytest.mark.e2e
def test_serving_alerts(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)
