"""promtool cases of the engine liveness alerts (group servescope-engine): a hung scheduler, a restart
loop, requests failing. The healthy-endpoint count is in test_rules_healthy_endpoints.py.

1 min samples and evaluations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.alerts.promtool import ENGINE, case, check, fires, run_promtool, series, series_of
from tests.alerts.serving import ENGINE_B, ENGINE_KEYS, ON_A, RUNNING

A_BY = {k: ENGINE[k] for k in ENGINE_KEYS}  # what `sum by (instance, model_name, engine, endpoint)` keeps
GENERATED = "servescope_serving_generation_tokens_total"
PROMPT = "servescope_serving_prompt_tokens_total"
FINISHED = "servescope_serving_requests_finished_total"


# --- a hung scheduler: requests running, no token for 5m (for 5m) ---------------------------------------
STUCK = "ServescopeSchedulerStuck"
STUCK_CASE = case(
    STUCK,
    [
        # Engine A generates until 10m, hangs with 6 requests running until 29m, then generates again.
        *series_of(ENGINE, {RUNNING: "6x40", GENERATED: "0+500x10 5000x19 5500+500x10"}),
        # Engine B is idle: nothing running, nothing generated.
        *series_of(ENGINE_B, {RUNNING: "0x40", GENERATED: "900x40"}),
    ],
    check(STUCK, "14m"),  # 4 flat minutes in the window
    check(STUCK, "19m"),  # flat over [10m, 15m] from 15m: pending
    fires(
        STUCK,
        "20m",
        ENGINE,
        f"{ON_A} has 6 requests running and generated no token in 5m: its scheduler hangs (vLLM "
        "refreshes its gauges on engine steps only, so they look healthy).",
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
    fires(
        LOOP,
        "21m",
        ENGINE,
        f"{ON_A} restarted 2 times in 30m (its counters went back to zero): it crashes under load or at "
        "start-up.",
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
    fires(
        ERRORS,
        "17m",
        A_BY,
        f"{ON_A}: 9.091% of the requests it finished in 5m ended in abort or error (bound 5%).",
    ),
    check(ERRORS, "31m"),
)

CASES: list[dict[str, Any]] = [STUCK_CASE, LOOP_CASE, ERRORS_CASE]


@pytest.mark.e2e
def test_engine_alerts(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)
