"""promtool cases for the canary alerts (groups servescope-canary-records and servescope-canary), judged on
the ALERTS series: what an on-call person is told about two revisions of one model.

One model, `deepseek`, served by its stable revision `stable1` (900 requests a minute) and a canary
`canary2` (100 a minute: 10 % of the traffic) in tests/canary/series.py; 1 min samples and evaluations.
Each revision's figures over the 10 min window come from increase() over its raw series, so a canary
counts the requests it served, not its rate times ten minutes: 4 minutes in, it has served 500 (the
minimum, `canary.min_requests`), with increase()'s extrapolation of the first samples.

- 2x P99 at 10 % of the traffic: the canary's P99 is 0.6875 s against 0.35 s (1.96x, over 1.5x), and 4 %
  of its requests miss the 0.5 s bound against none of the stable's (z = 18.9 on 1,000 and 9,000
  requests): the ticket names the canary revision, once per SLI. The model's own SLO is fine (0.4 %).
- an equal canary: nothing at all.
- too little traffic (4 requests a minute, 40 in the window): nothing, and no comparison is recorded.
- both revisions regress alike (25 % over the bound): the model's SLO page, and no canary alert.
- a canary that burns its users' budget (30 % over the bound, stable fine): the page, not the ticket.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.alerts.promtool import case, check, firing, run_promtool
from tests.alerts.slo import burn_firing
from tests.canary.series import (
    CANARY,
    EQUAL_MINUTE,
    SLOW_MINUTE,
    STABLE,
    STABLE_MINUTE,
    Minute,
    revision,
    scaled,
)

WORSE = "ServescopeCanaryWorseThanStable"
BURN = "ServescopeCanarySloBurn"
CANARY_ALERTS = f'ALERTS{{alertname=~"{WORSE}|{BURN}"}}'
NAMES = {"model_name": "deepseek", "revision": "canary2", "stable_revision": "stable1"}


def worse(sli: str, value: str) -> dict[str, Any]:
    description = (
        f"deepseek revision canary2 is worse than the stable revision stable1: {sli} is {value} (over 10m, "
        "both with at least 500 requests); analyse it with `servescope canary analyze`, then promote it or "
        "roll it back."
    )
    return firing(WORSE, {**NAMES, "sli": sli}, description)


def alerts_are(at: str, *alerts: tuple[str, str, str, str]) -> dict[str, Any]:
    """At `at`, the canary alerts in ALERTS are exactly these (name, sli, state, severity)."""
    samples = []
    for name, sli, state, severity in alerts:
        labels = {"alertname": name, "alertstate": state, "bundle": "servescope", **NAMES}
        labels |= {"severity": severity, "sli": sli}
        inner = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
        samples.append({"labels": f"ALERTS{{{inner}}}", "value": 1})
    return {"expr": CANARY_ALERTS, "eval_time": at, "exp_samples": samples}


# --- 2x P99 at 10 % of the traffic: worse for 30 min, then equal -----------------------------------------
# 3m: 400 canary requests in the window, not enough: no state at all. From 4m (500) both comparisons hold:
# pending through 13m, firing from 14m (`for: 10m`). After the fix at 30m the window holds fewer slow
# minutes each minute: at 42m the P99 ratio is 1.36 and the increase 0.44 %: silent.
SLOWER = case(
    "canary at 2x P99 with 10 % of the traffic",
    revision(STABLE, [(60, STABLE_MINUTE)]) + revision(CANARY, [(30, SLOW_MINUTE), (30, EQUAL_MINUTE)]),
    check(WORSE, "3m"),
    check(WORSE, "13m"),
    check(WORSE, "20m", worse("ttft_p99_ratio", "1.96"), worse("ttft_slo_miss_increase", "0.04")),
    check(BURN, "20m"),  # 4 % of the canary's requests: no paging burn
    check("ServescopeTtftSloBurnFast", "20m"),  # the model misses 0.4 %
    check(WORSE, "45m"),
    exprs=[
        alerts_are("3m"),
        alerts_are(
            "13m",
            (WORSE, "ttft_p99_ratio", "pending", "warning"),
            (WORSE, "ttft_slo_miss_increase", "pending", "warning"),
        ),
        alerts_are(
            "20m",
            (WORSE, "ttft_p99_ratio", "firing", "warning"),
            (WORSE, "ttft_slo_miss_increase", "firing", "warning"),
        ),
        alerts_are("45m"),
    ],
)

# --- an equal canary, with 1 % of aborted requests on both revisions ----------------------------------------
WITH_ABORTS = Minute(900, STABLE_MINUTE.ttft, aborted=9)
EQUAL = case(
    "canary equal to stable",
    revision(STABLE, [(40, WITH_ABORTS)]) + revision(CANARY, [(40, scaled(WITH_ABORTS, 100))]),
    check(WORSE, "20m"),
    check(WORSE, "39m"),
    check(BURN, "39m"),
    exprs=[alerts_are("20m"), alerts_are("39m")],
)

# --- too little traffic: 2x slower, at 4 requests a minute -----------------------------------------------
LITTLE = "model_revision:servescope_canary_ttft_p99_vs_stable:ratio10m"
TOO_LITTLE = case(
    "canary with too little traffic",
    revision(STABLE, [(40, STABLE_MINUTE)]) + revision(CANARY, [(40, scaled(SLOW_MINUTE, 4))]),
    check(WORSE, "20m"),
    check(WORSE, "39m"),
    exprs=[
        alerts_are("39m"),
        # Its P99 is recorded (twice the stable's), but no comparison: not enough data is no verdict.
        {
            "expr": 'round(model_revision:servescope_ttft_seconds:p99_rate10m{revision="canary2"}, 0.01)',
            "eval_time": "39m",
            "exp_samples": [{"labels": '{model_name="deepseek", revision="canary2"}', "value": 0.74}],
        },
        {"expr": LITTLE, "eval_time": "39m", "exp_samples": []},
    ],
)

# --- both revisions regress alike: 25 % over the bound from 10m --------------------------------------------
# The model's 1h ratio passes 14.4 % once 35 of its 60 minutes are slow (45m): the model's fast burn pages
# (firing at 80m, the whole hour at 25 %); the two revisions compare equal throughout.
REGRESSED = Minute(900, (300, 600, 675, 800, 900, 900))
REGRESSION = case(
    "a regression of both revisions is the model's SLO page",
    revision(STABLE, [(10, STABLE_MINUTE), (90, REGRESSED)])
    + revision(CANARY, [(10, scaled(STABLE_MINUTE, 100)), (90, scaled(REGRESSED, 100))]),
    check(WORSE, "80m"),
    check(BURN, "80m"),
    check(
        "ServescopeTtftSloBurnFast",
        "80m",
        burn_firing("ServescopeTtftSloBurnFast", "deepseek", "25%"),
    ),
    exprs=[alerts_are("60m"), alerts_are("80m")],
)

# --- a canary that burns its own users' budget: 30 % over the bound for 40 min, stable fine ----------------
# Its own 1h and 5m shares pass 14.4 % at once; once it served 500 requests (4m or 5m, as increase()
# extrapolates) it is also significantly worse than stable: pending at 6m, firing 2 min later (`for: 2m`).
# The ticket says nothing while the page holds.
# Fixed at 40m: its 5m share is 0 from 45m, the page resolves; the ticket's window clears by 50m, before
# its `for` could elapse.
BURNING_MINUTE = Minute(100, (10, 30, 70, 90, 100, 100))
BURNING = case(
    "a canary burning its SLO pages",
    revision(STABLE, [(70, STABLE_MINUTE)]) + revision(CANARY, [(40, BURNING_MINUTE), (30, EQUAL_MINUTE)]),
    check(BURN, "3m"),
    check(
        BURN,
        "20m",
        firing(
            BURN,
            {**NAMES, "sli": "ttft"},
            "deepseek revision canary2: 30% of its requests miss the ttft objective (99.00% under the "
            "bound), a paging burn rate, and significantly more than on the stable revision stable1: roll "
            "the canary back.",
        ),
    ),
    check(WORSE, "20m"),
    check("ServescopeTtftSloBurnFast", "20m"),  # the model misses 3 %
    check(BURN, "69m"),
    check(WORSE, "69m"),
    exprs=[
        alerts_are("6m", (BURN, "ttft", "pending", "critical")),
        alerts_are("20m", (BURN, "ttft", "firing", "critical")),
        alerts_are("69m"),
    ],
)

CASES = [SLOWER, EQUAL, TOO_LITTLE, REGRESSION, BURNING]


@pytest.mark.e2e
@pytest.mark.parametrize("group", CASES, ids=lambda group: group["name"])
def test_canary_alerts(group: dict[str, Any], tmp_path: Path) -> None:
    run_promtool([group], tmp_path)
