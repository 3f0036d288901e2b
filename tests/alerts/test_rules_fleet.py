"""promtool cases of ServescopeFleetCapacityBufferLow (group servescope-serving): per model pool, the spare
share 1 - avg(busy) of its engines' GPUs under 20%, for 15m.

1 min samples and evaluations.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerts.inputs import engine_gpu_info
from tests.alerts.promtool import case, check, fires, run_promtool, series
from tests.alerts.serving import GPU0, GPU1, UTIL

FLEET = "ServescopeFleetCapacityBufferLow"
SM_ACTIVE = "servescope_dcgm_sm_active_ratio"
NODE_B = {"job": "servescope", "instance": "node-b:9108", "hostname": "node-b"}
FLEET_GPUS = [
    GPU0,
    GPU1,
    {**NODE_B, "gpu": "0", "uuid": "GPU-0100"},
    {**NODE_B, "gpu": "1", "uuid": "GPU-0101"},
]
IDLE_GPU = {**NODE_B, "gpu": "2", "uuid": "GPU-0102"}  # no engine runs on it
LLAMA_GPU = {**NODE_B, "gpu": "3", "uuid": "GPU-0103"}
LLAMA = {
    **{k: NODE_B[k] for k in ("job", "instance")},
    "model_name": "llama",
    "engine": "0",
    "endpoint": "http://10.0.0.9:8000/metrics",
}


def _deepseek_pool(minutes: int = 45) -> list[dict[str, str]]:
    """servescope_engine_gpu_info of deepseek's four engines, one on each FLEET_GPUS GPU."""
    return [
        engine_gpu_info(
            {
                "job": gpu["job"],
                "instance": gpu["instance"],
                "model_name": "deepseek",
                "engine": str(i),
                "endpoint": f"http://10.0.1.{i}:8000/metrics",
            },
            gpu,
            "4101",
            f"1x{minutes}",
        )
        for i, gpu in enumerate(FLEET_GPUS)
    ]


def _pool_busy(*values: str) -> list[dict[str, str]]:
    """The utilisation of each FLEET_GPUS GPU, in order."""
    return [series(UTIL, gpu, busy) for gpu, busy in zip(FLEET_GPUS, values, strict=True)]


# deepseek's four GPUs at 50%, then 90/95/80/85% from minute 5 to 33 (average 87.5%: 12.5% spare), then 50%
# again. Over the 5m averages (6 samples) the pool is under 20% spare from 9m ((5 x 0.875 + 0.5) / 6 =
# 81.25% busy) to 34m. An idle GPU with no engine and llama's GPU at 30% do not count in deepseek's pool
# (over all six GPUs the mean would be 64%, 36% spare: silent); llama's pool is 70% spare.
BUSY_POOL = case(
    f"{FLEET} busy pool",
    [
        *_pool_busy(*(f"0.5x4 {busy}x29 0.5x10" for busy in ("0.9", "0.95", "0.8", "0.85"))),
        series(UTIL, IDLE_GPU, "0x45"),
        series(UTIL, LLAMA_GPU, "0.3x45"),
        *_deepseek_pool(),
        engine_gpu_info(LLAMA, LLAMA_GPU, "7001", "1x45"),
    ],
    check(FLEET, "23m"),  # pending for 14m
    fires(
        FLEET,
        "24m",
        {"model_name": "deepseek"},
        "Only 12.5% of the GPU time of deepseek's engines is spare (the buffer is 20%): add workers before "
        "the next burst.",
    ),
    check(FLEET, "36m"),  # the averages fell back at 35m
)
# One GPU fully busy among idle ones: average (1 + 0.3 + 0.3 + 0.3) / 4 = 47.5%, 52.5% spare.
ONE_BUSY_GPU = case(
    f"{FLEET} one busy GPU",
    [*_pool_busy("1x30", "0.3x30", "0.3x30", "0.3x30"), *_deepseek_pool(30)],
    check(FLEET, "20m"),
    check(FLEET, "30m"),
)
# Every decoding engine reads ~100% in NVML; DCGM's SM activity says half of each GPU works: 50% spare,
# silent (on NVML utilisation alone the pool would read 0% spare and fire).
SM_ACTIVITY = case(
    f"{FLEET} SM activity where DCGM reports it",
    [
        *_pool_busy(*["1x30"] * len(FLEET_GPUS)),
        *(series(SM_ACTIVE, gpu, "0.5x30") for gpu in FLEET_GPUS),
        *_deepseek_pool(30),
    ],
    check(FLEET, "20m"),
    check(FLEET, "30m"),
)

CASES = [BUSY_POOL, ONE_BUSY_GPU, SM_ACTIVITY]


@pytest.mark.e2e
def test_fleet_capacity_buffer(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)
