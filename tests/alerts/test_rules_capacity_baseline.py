"""promtool cases for the production daily baseline (group servescope-capacity-baseline).

Eight days of one engine on 2 GPUs at 1000 output tokens/s (500 per GPU) with 50 requests running, then
at 7d12h (10800 min) a change: throughput falls to 700 tokens/s at the same batch (fires after `for: 1h`,
resolves when it recovers), or falls with the batch (the traffic got lighter: silent), or the engine
has only ten hours of history (no day-old baseline: silent). A second process of the engine on one
of its GPUs (two servescope_engine_gpu_info series for that GPU) still counts 2 GPUs: silent where it
starts at the change, firing where it ran all along and the engine got slower. Rules are evaluated
every 15 minutes to keep eight days of evaluations of the whole bundle short.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerts.promtool import ENGINE, case, check, firing, run_promtool, series

ALERT = "ServescopeThroughputBelowBaseline"
CHANGE = 10800  # minutes: 7 days 12 hours
END = 11400
DESCRIPTION = (
    f"{ENGINE['model_name']} engine {ENGINE['engine']} on {ENGINE['instance']} has generated over 20% fewer "
    "tokens per second per GPU than a day ago (and a week ago) for 1h, with the same running batch: the "
    "engine got slower, not the traffic lighter."
)
GPUS = [
    series(
        "servescope_engine_gpu_info",
        {**ENGINE, "uuid": f"GPU-000{i}", "gpu": str(i), "pid": "42"},
        f"1x{END}",
    )
    for i in (0, 1)
]


def _tokens(before: int, after: int, back_at: int | None = None) -> str:
    """A counter rising `before` tokens/min to CHANGE, `after` from then (and `before` again from back_at)."""
    value = before * CHANGE
    if back_at is None:
        return f"0+{before}x{CHANGE - 1} {value}+{after}x{END - CHANGE}"
    slow = back_at - CHANGE
    resumed = value + after * slow
    return f"0+{before}x{CHANGE - 1} {value}+{after}x{slow - 1} {resumed}+{before}x{END - back_at}"


def _running(before: int, after: int) -> str:
    return f"{before}x{CHANGE - 1} {after}x{END - CHANGE}"


def _tokens_series(values: str) -> dict[str, str]:
    return series("servescope_serving_generation_tokens_total", ENGINE, values)


def _running_series(values: str) -> dict[str, str]:
    return series("servescope_serving_requests_running", ENGINE, values)


SLOWER = case(
    f"{ALERT}: slower at the same batch",
    [
        *GPUS,
        _tokens_series(_tokens(60_000, 42_000, back_at=CHANGE + 180)),
        _running_series(_running(50, 50)),
    ],
    check(ALERT, f"{CHANGE - 10}m"),  # before the change
    check(ALERT, f"{CHANGE + 40}m"),  # below the baseline, pending for less than 1h
    check(ALERT, f"{CHANGE + 90}m", firing(ALERT, ENGINE, DESCRIPTION)),
    check(ALERT, f"{CHANGE + 200}m"),  # recovered at +180m,
)
LIGHTER = case(
    f"{ALERT}: lighter traffic, same speed per request",
    [*GPUS, _tokens_series(_tokens(60_000, 36_000)), _running_series(_running(50, 30))],
    check(ALERT, f"{CHANGE + 90}m"),
    check(ALERT, f"{CHANGE + 300}m"),
)
NO_HISTORY = case(
    f"{ALERT}: no day-old baseline yet",
    [
        *(
            series(
                s["series"].split("{")[0],
                {**ENGINE, "uuid": f"GPU-000{i}", "gpu": str(i), "pid": "42"},
                f"_x{CHANGE - 600} 1x1200",
            )
            for i, s in enumerate(GPUS)
        ),
        _tokens_series(f"_x{CHANGE - 600} 0+60000x599 36000000+42000x600"),
        _running_series(f"_x{CHANGE - 600} 50x1200"),
    ],
    check(ALERT, f"{CHANGE + 90}m"),
    check(ALERT, f"{CHANGE + 500}m"),
)


def _second_pid(values: str) -> dict[str, str]:
    """Another process of the engine on GPU 0 (a second info series for the same GPU)."""
    return series(
        "servescope_engine_gpu_info", {**ENGINE, "uuid": "GPU-0000", "gpu": "0", "pid": "43"}, values
    )


SECOND_PID_ALL_ALONG = case(
    f"{ALERT}: slower at the same batch, two processes on one GPU",
    [
        *GPUS,
        _second_pid(f"1x{END}"),
        _tokens_series(_tokens(60_000, 42_000)),
        _running_series(_running(50, 50)),
    ],
    check(ALERT, f"{CHANGE - 10}m"),
    check(ALERT, f"{CHANGE + 40}m"),
    check(ALERT, f"{CHANGE + 90}m", firing(ALERT, ENGINE, DESCRIPTION)),
)
SECOND_PID_STARTS = case(
    f"{ALERT}: a second process on one GPU, same speed",
    [
        *GPUS,
        _second_pid(f"_x{CHANGE} 1x{END - CHANGE}"),
        _tokens_series(_tokens(60_000, 60_000)),
        _running_series(_running(50, 50)),
    ],
    check(ALERT, f"{CHANGE + 90}m"),
    check(ALERT, f"{CHANGE + 300}m"),
)
CASES = [SLOWER, LIGHTER, NO_HISTORY, SECOND_PID_ALL_ALONG, SECOND_PID_STARTS]


@pytest.mark.e2e
@pytest.mark.slow
def test_throughput_below_baseline(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path, evaluation_interval="15m")
