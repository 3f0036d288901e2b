"""promtool cases of the load-normalised leak verdict (ServescopeGpuMemoryLeakSuspected): memory that
follows a daily 3x ramp of the load is no leak; 40 MiB/min of memory that no load explains is, under a
flat load and under a ramp, hours before the GPU runs out.

1 min samples and evaluations. The GPU's memory is 60 GiB (weights and KV cache) + 8 GiB x its busy share
(activations that follow the batch, the part a diurnal ramp moves) + a 256 MiB allocator sawtooth every
10 min + the leak. A daily ramp from 0.25 to 0.75 busy over 3 h grows memory 4 GiB (22.8 MiB/min), more
than the leak bound (4 MiB/min): a verdict that ignores the load calls it a leak.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench.quality.rule_engine import values
from tests.alerts.promtool import GPU, GPU_BY, ON_GPU, case, check, fires, never, run_promtool, series

LEAK = "ServescopeGpuMemoryLeakSuspected"
GIB, MIB = 1024**3, 1024**2
LEAK_RATE = 40 * MIB  # bytes a minute
DAY = 1440  # minutes
RAMP_START = 9 * 60  # the day's ramp: 09:00-12:00 up, 15:00-18:00 down


def daily(minute: int) -> float:
    """The GPU's busy share over a day: 0.25 at night, up to 0.75 from 09:00 to 12:00, down 15:00-18:00."""
    hour = (minute % DAY) / 60
    if hour < 9 or hour >= 18:
        return 0.25
    if hour < 12:
        return 0.25 + 0.5 * (hour - 9) / 3
    return 0.75 if hour < 15 else 0.75 - 0.5 * (hour - 15) / 3


def gpu(minutes: int, busy: Callable[[int], float], leak_from: int | None = None) -> list[dict[str, str]]:
    """The GPU's memory used and utilisation, a sample a minute for `minutes` minutes."""
    memory, load = [], []
    for minute in range(minutes + 1):
        leaked = LEAK_RATE * max(0, minute - leak_from) if leak_from is not None else 0
        sawtooth = 256 * MIB * (minute % 10) / 10
        load.append(round(busy(minute), 4))
        memory.append(float(60 * GIB + 8 * GIB * busy(minute) + sawtooth + leaked))
    return [
        series("servescope_gpu_memory_used_bytes", GPU, values(memory)),
        series("servescope_gpu_utilization_ratio", GPU, values(load)),
    ]


def description(per_minute: str) -> str:
    return (
        f"{ON_GPU}: memory grows {per_minute}B/min more than its load explains (memory regressed on the "
        "GPU's busy share over 1d): a leak, not traffic; /api/v1/gpus on the exporter gives the curve and "
        "its own verdict."
    )


# A day and a quarter of the daily cycle (the ramp up, the peak, the ramp down, the night, the next
# morning's ramp): memory follows the load, so nothing is left to grow.
DIURNAL = case(
    f"{LEAK}: memory follows a daily 3x ramp",
    gpu(DAY + 12 * 60, daily),
    check(LEAK, "10h30m"),  # half way up the first ramp
    check(LEAK, "12h"),
    check(LEAK, "17h"),  # half way down
    check(LEAK, "1d10h"),  # the next morning's ramp
    exprs=[never(LEAK, "1d12h", "1d12h")],
)
# A flat load and a leak from 01:00: both halves of the last hour of 10-minute means grow 40 MiB/min
# (pending from 01:40), firing from 01:50 (`for: 10m`).
FLAT = case(
    f"{LEAK}: 40 MiB/min under a flat load",
    gpu(300, lambda minute: 0.5, leak_from=60),
    check(LEAK, "1h30m"),
    check(LEAK, "1h49m"),
    fires(LEAK, "1h50m", GPU_BY, description("40.17Mi")),
    fires(LEAK, "5h", GPU_BY, description("40.17Mi")),
)
# The leak starts with the second day's ramp: the first day's cycle says what the load explains, so the
# leak shows through the ramp 50 minutes after it began (2 GiB leaked). An H200 at 0.9 of its 141 GB
# leaves 14 GB: at 40 MiB/min the OOM is 5.8 h after the leak's start, 4.9 h after the alert.
LEAK_START = DAY + RAMP_START
UNDER_RAMP = case(
    f"{LEAK}: 40 MiB/min under the next day's ramp",
    gpu(LEAK_START + 120, daily, leak_from=LEAK_START),
    check(LEAK, "1d9h30m"),
    check(LEAK, "1d9h49m"),
    fires(LEAK, "1d9h50m", GPU_BY, description("40.51Mi")),
    exprs=[never(LEAK, "1d9h", "1d9h")],
)
CASES = [DIURNAL, FLAT, UNDER_RAMP]


@pytest.mark.e2e
@pytest.mark.slow
def test_leaks_are_judged_against_the_load(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)
