"""promtool cases of the engine liveness alerts (group servescope-engine) and the endpoint count record.

1 min samples and evaluations, except the healthy-endpoints baseline, which needs a day (5 min).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.alerts.promtool import ENGINE, TARGET, case, check, firing, run_promtool, series

ENGINE_B = {**ENGINE, "engine": "1", "endpoint": "http://10.0.0.1:8001/metrics"}
ON_A = "deepseek engine 0 at http://10.0.0.1:8000/metrics"
KEYS = ("instance", "model_name", "engine", "endpoint")
A_BY = {k: ENGINE[k] for k in KEYS}  # what `sum by (instance, model_name, engine, endpoint)` keeps
RUNNING = "servescope_serving_requests_running"
GENERATED = "servescope_serving_generation_tokens_total"
PROMPT = "servescope_serving_prompt_tokens_total"
FINISHED = "servescope_serving_requests_finished_total"


# --- a hung scheduler: requests running, no token for 5m (for 5m) ---------------------------------------
STUCK = "ServescopeSchedulerStuck"
STUCK_CASE = case(
    STUCK,
    [
        # Engine A generates until 10m, hangs with 6 requests running until 29m, then generates again.
        series(RUNNING, ENGINE, "6x40"),
        series(GENERATED, ENGINE, "0+500x10 5000x19 5500+500x10"),
        # Engine B is idle: nothing running, nothing generated.
        series(RUNNING, ENGINE_B, "0x40"),
        series(GENERATED, ENGINE_B, "900x40"),
    ],
    check(STUCK, "14m"),  # 4 flat minutes in the window
    check(STUCK, "19m"),  # flat over [10m, 15m] from 15m: pending
    check(
        STUCK,
        "20m",
        firing(
            STUCK,
            ENGINE,
            f"{ON_A} has 6 requests running and generated no token in 5m: its scheduler hangs (vLLM "
            "refreshes its gauges on engine steps only, so they look healthy).",
        ),
    ),
    check(STUCK, "31m"),
)

# --- a restart loop: counters reset twice in 30m (for 1m) -----------------------------------------------
LOOP = "ServescopeEngineRestartLoop"
LOOP_CASE = case(
    LOOP,
    [
        # Engine A restarts at 10m and at 20m; engine B once, at 15m.
        series(PROMPT, ENGINE, "0+1000x9 0+1000x9 0+1000x30"),
        series(PROMPT, ENGINE_B, "0+1000x14 0+1000x35"),
    ],
    check(LOOP, "15m"),  # one reset
    check(LOOP, "20m"),  # the second: pending
    check(
        LOOP,
        "21m",
        firing(
            LOOP,
            ENGINE,
            f"{ON_A} restarted 2 times in 30m (its counters went back to zero): it crashes under load or at "
            "start-up.",
        ),
    ),
    check(LOOP, "41m"),  # the first reset left the window
)

# --- requests aborted or failed: over 5% of those finished, at over 0.1/s (for 10m) ---------------------
ERRORS = "ServescopeRequestErrorsHigh"
ERRORS_CASE = case(
    ERRORS,
    [
        # Engine A: 100 requests a minute finish with `stop`; 10 a minute abort from 5m to 25m. The 5m
        # ratio: 30 / 530 = 5.7% at 7m (pending), 50 / 550 = 9.091% from 10m to 25m.
        series(FINISHED, {**ENGINE, "finished_reason": "stop"}, "0+100x40"),
        series(FINISHED, {**ENGINE, "finished_reason": "abort"}, "0x4 10+10x20 210x20"),
        # Engine B: half its requests abort, but 2 a minute (0.03/s) is too few to judge.
        series(FINISHED, {**ENGINE_B, "finished_reason": "stop"}, "0+1x40"),
        series(FINISHED, {**ENGINE_B, "finished_reason": "abort"}, "0+1x40"),
    ],
    check(ERRORS, "16m"),  # pending since 7m
    check(
        ERRORS,
        "17m",
        firing(
            ERRORS,
            A_BY,
            f"{ON_A}: 9.091% of the requests it finished in 5m ended in abort or error (bound 5%).",
        ),
    ),
    check(ERRORS, "31m"),
)

CASES_1M: list[dict[str, Any]] = [STUCK_CASE, LOOP_CASE, ERRORS_CASE]

# --- healthy endpoints per model below its day's median (75%, for 15m; 5 min samples) ------------------
LOW = "ServescopeHealthyEndpointsLow"
KV = "servescope_serving_kv_cache_usage_ratio"


def _endpoint(model: str, n: int) -> dict[str, str]:
    return {**TARGET, "model_name": model, "engine": "0", "endpoint": f"http://10.1.{n}.1:8000/metrics"}


# deepseek runs 4 endpoints for a day; 2 die at 24h (their series go). qwen loses 1 of 4 at 24h: 3 is
# 75%, not under. llama's only endpoint dies at 24h: its count is gone, read as 0. At 12h the deepseek
# endpoints drop to 2 as well, but without a day of baseline nothing is judged.
DAY = "0.4x287"


def _low(model: str, count: int) -> str:
    return (
        f"{model} has {count} endpoints answering, under 75% of its median of the last day: engines died and "
        "were not replaced, and requests no engine answers leave no latency sample to burn the SLO."
    )


LOW_CASE = {
    "name": LOW,
    "interval": "5m",
    "input_series": [
        series(KV, _endpoint("deepseek", 1), f"{DAY} 0.4x30"),
        series(KV, _endpoint("deepseek", 2), f"{DAY} 0.4x30"),
        # 3 and 4 also go away from 12h to 12h50 (a rollout) and die at 24h.
        *(series(KV, _endpoint("deepseek", n), "0.4x143 stale _x10 0.4x132 stale") for n in (3, 4)),
        *(series(KV, _endpoint("qwen", n), f"{DAY} 0.4x30") for n in (1, 2, 3)),
        series(KV, _endpoint("qwen", 4), f"{DAY} stale"),
        series(KV, _endpoint("llama", 1), f"{DAY} stale"),
    ],
    "alert_rule_test": [
        check(LOW, "12h30m"),  # 2 of 4, but no day of baseline yet
        check(LOW, "24h10m"),  # pending since 24h
        check(
            LOW,
            "24h15m",
            firing(LOW, {"model_name": "deepseek"}, _low("deepseek", 2)),
            firing(LOW, {"model_name": "llama"}, _low("llama", 0)),
        ),
    ],
}
CASES_5M: list[dict[str, Any]] = [LOW_CASE]
CASES: list[dict[str, Any]] = [*CASES_1M, *CASES_5M]


@pytest.mark.e2e
def test_engine_alerts(tmp_path: Path) -> None:
    run_promtool(CASES_1M, tmp_path)


@pytest.mark.e2e
def test_healthy_endpoints(tmp_path: Path) -> None:
    run_promtool(CASES_5M, tmp_path, evaluation_interval="5m")
