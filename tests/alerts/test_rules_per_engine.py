"""promtool cases of the KV page on engines that span GPUs: a tensor-parallel group is one engine on N GPUs
and pages once; data-parallel engines mapped per rank page only for the GPUs their own rank runs on.

1 min samples and evaluations. Engine A steps throughout and holds 90% of its KV cache from minute 5; the
model's TTFT budget burns at a paging rate from minute 5: the page is pending at 5m and fires at 7m, as in
the single-GPU case of test_rules_serving.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.alerts.inputs import engine_gpu_info
from tests.alerts.promtool import TARGET, case, check, fires, firing, run_promtool, series
from tests.alerts.serving import (
    COMBINED,
    COMBINED_A,
    ENGINE_A,
    ENGINE_B,
    HURTING,
    HURTING_A,
    KV,
    KV_PRESSURE,
    ON_A,
    TTFT_BURN_FROM_3M,
    UTIL,
    engine_page,
    kv_pressure_text,
    node_gpu_facts,
    stepping,
    ttft,
)

GPUS = [{**TARGET, "gpu": str(n), "uuid": f"GPU-000{n}", "hostname": "node-a"} for n in range(8)]


def tensor_parallel(size: int) -> dict[str, Any]:
    """Engine A on GPUs 0..size-1 (one worker PID each), every one of them saturated: one page."""
    gpus = GPUS[:size]
    return case(
        f"{HURTING}: one engine on {size} GPUs (TP={size})",
        [
            *(series(UTIL, gpu, "0.95x30") for gpu in gpus),
            *(engine_gpu_info(ENGINE_A, gpu, str(4100 + n), "1x30") for n, gpu in enumerate(gpus)),
            *(node_gpu_facts(gpu, 30) for gpu in gpus),
            series(KV, ENGINE_A, "0.5x4 0.9x25"),
            *ttft(ENGINE_A, TTFT_BURN_FROM_3M),
            stepping(ENGINE_A, 30),
        ],
        check(HURTING, "6m"),  # pending
        fires(HURTING, "7m", engine_page(ENGINE_A), HURTING_A),  # once, not per GPU
        # The ticket is per engine too (the page silences it in Alertmanager).
        fires(COMBINED, "10m", engine_page(ENGINE_A), COMBINED_A),
    )


# Data-parallel engines mapped per rank: engine A (rank 0) at 90% KV on an idle GPU 0, engine B (rank 1)
# at 20% KV on a busy GPU 1, both with requests waiting. Neither page nor warning for "engine A on GPU 1"
# (the cross product of engines and GPUs made one); engine A's KV pressure alone alerts.
DP_UNEQUAL: dict[str, Any] = case(
    f"{HURTING}: data-parallel engines of unequal load",
    [
        series(UTIL, GPUS[0], "0.1x30"),
        series(UTIL, GPUS[1], "0.95x30"),
        engine_gpu_info(ENGINE_A, GPUS[0], "4101", "1x30"),
        engine_gpu_info(ENGINE_B, GPUS[1], "4102", "1x30"),
        node_gpu_facts(GPUS[0], 30),
        node_gpu_facts(GPUS[1], 30),
        series(KV, ENGINE_A, "0.5x4 0.9x25"),
        series(KV, ENGINE_B, "0.2x30"),
        # The model's TTFT budget burns: still no engine is both out of KV and on a saturated GPU.
        *ttft(ENGINE_A, TTFT_BURN_FROM_3M),
        stepping(ENGINE_A, 30),
        stepping(ENGINE_B, 30),
    ],
    check(HURTING, "7m"),
    check(HURTING, "20m"),
    check(COMBINED, "20m"),
    check(
        KV_PRESSURE,
        "20m",
        firing(KV_PRESSURE, ENGINE_A, kv_pressure_text(ON_A, 90)),
    ),
)


@pytest.mark.e2e
def test_kv_page_once_per_engine(tmp_path: Path) -> None:
    run_promtool([tensor_parallel(2), tensor_parallel(8), DP_UNEQUAL], tmp_path)
