"""promtool cases for the latency SLO burn rates: recording rules (servescope-slo-records) and the burn
alerts (servescope-slo). The P99 and bucket-layout cases are in test_rules_slo_p99.py.

Objective 0.99 of requests under the bound (0.5 s to the first token, 60 s end to end), so the error
budget is 1% and a pair of windows fires when both
error ratios exceed factor x 1%: 14.4% (1h & 5m) or 6% (6h & 30m) pages, 3% (1d & 2h) or 1% (3d & 6h)
tickets. Each scenario picks an error ratio between two factors so that one pair alone fires, and
`promql_expr_test` shows the recorded ratios (hand computed in the comments) that keep the other pair
silent. The description shows `$value`: the long window's ratio of the pair that matched.

Three models run side by side: `deepseek` and `qwen` take turns in the scenarios (the TTFT and the e2e
histograms of one model follow different scenarios, so an alert reading the wrong histogram fails), and
`llama` stays at 0.5% errors, half the budget, throughout: no burn alert may name it.

Arithmetic: the bundle records each model's 5 min rates of good and of all requests once (r(t), exact:
samples are aligned with the evaluations and the counters start at 0, so rate() does not extrapolate),
and a window w's error ratio is 1 - sum(good r(t')) / sum(all r(t')) over the records t' in [T - w, T]
(Prometheus 2.x ranges include both ends). With 1 min records each minute's requests count 5 times, fewer
at the window's ends: at a change of error rate the long windows move a little differently from an exact
ratio over w, which the hand computations below follow ("5-rate sum"). In constant phases the ratio is
the phase's. The 5m ratio is the 5 min rate's. Ratios are compared after `round(x, 0.0001)`: promtool
2.42 compares floats exactly. promtool evaluates every group at every step, the long-window group (every
5 min in Prometheus) included.

promtool evaluates the rule groups in no fixed order (without `group_eval_order`), and Prometheus runs
them independently: an alert may read the recorded ratios of the previous evaluation. Every check here
holds either way: pending checks sit one interval after the condition turns true, and firing checks where
the ratios did not change over the last interval. This is also why the multi-day case evaluates every 5
min and not coarser: a record older than the 5 min lookback would be invisible to a lagging alert.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.alerts.promtool import case, check, firing, run_promtool_at
from tests.alerts.slo import (
    DEEPSEEK,
    LLAMA,
    OBJECTIVE,
    QWEN,
    SLIS,
    WINDOWS,
    alert_state,
    histogram,
    ratios,
)

# (requests, requests under the bound) per scrape interval.
BASE = (1000, 995)  # 0.5% errors: half the budget
BURST = (1000, 800)  # 20%: above 14.4x
MID = (1000, 930)  # 7%: between 6x and 14.4x
SLOW_MID = (1000, 960)  # 4%: between 3x and 6x
LOW = (1000, 985)  # 1.5%: between 1x and 3x
BUSY = (10000, 9950)  # 0.5% at ten times the traffic


def _burn(alert: str, model: str, pct: str) -> dict[str, Any]:
    sli = "ttft" if alert.startswith("ServescopeTtft") else "e2e"
    words = SLIS[sli][2]
    start = f"{model}: {pct} of requests miss the {words} objective {OBJECTIVE[sli]}"
    if alert.endswith("Fast"):
        return firing(
            alert, {"model_name": model}, f"{start}; at this rate the 30-day budget is gone in under 5 days."
        )
    return firing(alert, {"model_name": model}, f"{start} over days: the budget will not last the month.")


def _burn_series(
    first: list[tuple[int, tuple[int, int]]], second: list[tuple[int, tuple[int, int]]], steps: int
) -> list[dict[str, str]]:
    """Per SLI: one model on `first`, another on `second` (swapped between the SLIs), llama at the base."""
    inputs: list[dict[str, str]] = []
    for sli, on_first, on_second in (("ttft", DEEPSEEK, QWEN), ("e2e", QWEN, DEEPSEEK)):
        inputs += (
            histogram(sli, on_first, first)
            + histogram(sli, on_second, second)
            + histogram(sli, LLAMA, [(steps, BASE)])
        )
    return inputs


# Per SLI: the model that follows the first scenario, and the one that follows the second (swapped
# between the SLIs, so an alert reading the wrong histogram fails).
MODELS = (("ttft", "deepseek", "qwen"), ("e2e", "qwen", "deepseek"))
Checks = Callable[[str, str, str], list[dict[str, Any]]]
Exprs = Callable[[str, str, str, str], list[dict[str, Any]]]


def burn_case(
    name: str, speed: str, inputs: list[dict[str, str]], *, checks: Checks, exprs: Exprs, interval: str
) -> dict[str, Any]:
    """One promtool group for `Servescope<SLI>SloBurn<speed>` of both SLIs: `checks(alert, first, second)`
    and `exprs(alert, sli, first, second)` give each SLI's alert and PromQL checks."""
    alert_checks: list[dict[str, Any]] = []
    promql_checks: list[dict[str, Any]] = []
    for sli, first, second in MODELS:
        alert = f"Servescope{SLIS[sli][1]}SloBurn{speed}"
        alert_checks += checks(alert, first, second)
        promql_checks += exprs(alert, sli, first, second)
    return case(name, inputs, *alert_checks, interval=interval, exprs=promql_checks)


# --- fast burn (page, for 2m): 1 min samples and evaluations, 252 min -----------------------------------
# S14 (the 14.4x pair alone): 0.5% to 180m, 20% from 181m to 245m, 0.5% after. Errors per minute: 5, 200.
S14 = [(180, BASE), (65, BURST), (7, BASE)]
# S6 (the 6x pair alone): 7% from the start to 60m, 0.5% after. Errors per minute: 70, 5.
S6 = [(60, MID), (192, BASE)]
FAST_STEPS = 252


def _fast_burn_checks(alert: str, s14: str, s6: str) -> list[dict[str, Any]]:
    return [
        # S6 from the first evaluation: 5m = 30m = 1h = 6h = 7%; true at 1m, pending at 2m either way.
        check(alert, "2m"),
        check(alert, "30m", _burn(alert, s6, "7%")),
        # 68m, 8 min after S6 ended: 30m (5-rate sum over the 31 records 38m..68m: 23 of 5 minutes at 70
        # errors, then 4 + 3 + 2 + 1 more minutes at 70, the other 30 minutes at 5) =
        # (125*70 + 30*5) / 155000 = 5.74% < 6%, while 6h = 6.41% still burns: the short window ends the
        # condition (from 67m); keep_firing_for 15m holds the page (below), which resolves from 82m.
        check(alert, "84m"),
        # S14 at 180m + b: the 5-rate sum of 1h is over 14.4% from b = 46 (14.57%); b = 45 gives 14.25%.
        check(alert, "225m"),
        check(alert, "227m"),  # pending since 226m (or 227m)
        check(alert, "245m", _burn(alert, s14, "20%")),  # 1h all at 20% at 244m and 245m
        # 251m: 5m = 0.5% ends the condition although 1h = (54*200 + 6*5) / 60000 = 18.05%; kept
        # firing for 15m (below), the page resolves from 266m.
        check(alert, "268m"),
    ]


def _fast_burn_exprs(alert: str, sli: str, s14: str, s6: str) -> list[dict[str, Any]]:
    return [
        alert_state(alert, s6, "2m"),
        # A burn that dips under its rate within keep_firing_for (15m) is one page: still firing.
        alert_state(alert, s6, "68m", "firing"),
        alert_state(alert, s6, "80m", "firing"),
        alert_state(alert, s14, "251m", "firing"),
        # 30m: 1h at 7% < 14.4%, so only the 6x pair matches.
        *ratios(sli, s6, "30m", w5m=0.07, w30m=0.07, w1h=0.07, w6h=0.07),
        *ratios(sli, s6, "68m", w30m=0.0574, w6h=0.0641),
        alert_state(alert, s14, "227m"),
        # 245m: 6h (all 245 min; the first 4 records hold fewer minutes) = 5.56% < 6%: only the 14.4x
        # pair matches.
        *ratios(sli, s14, "245m", w5m=0.2, w30m=0.2, w1h=0.2, w6h=0.0556),
        *ratios(sli, s14, "251m", w5m=0.005, w1h=0.1872),
        *ratios(sli, "llama", f"{FAST_STEPS}m", **{f"w{w}": 0.005 for w in WINDOWS}),
    ]


def fast_burn() -> dict[str, Any]:
    return burn_case(
        "SLO fast burn: 14.4x pair (1h & 5m) and 6x pair (6h & 30m)",
        "Fast",
        _burn_series(S14, S6, FAST_STEPS),
        checks=_fast_burn_checks,
        exprs=_fast_burn_exprs,
        interval="1m",
    )


# --- slow burn (ticket, for 15m): 5 min samples and evaluations, 2470 min (41 h) ------------------------
# S3 (the 3x pair alone): 0.5% at ten times the traffic for 16 h (192 steps), 4% for 24h10m (290 steps, to
# 2410m), 0.5% after. Errors per step: 50 (of 10000), 40, 5. With steady traffic a 1d ratio over 3% would
# drag the 3d ratio over 1% too; the busy hours before keep it under, so the 3x pair fires on its own.
S3 = [(192, BUSY), (290, SLOW_MID), (12, BASE)]
# S1 (the 1x pair alone): 1.5% for 10 h (120 steps), 0.5% after. Errors per step: 15, 5.
S1 = [(120, LOW), (374, BASE)]
SLOW_STEPS = 494


def _slow_burn_checks(alert: str, s3: str, s1: str) -> list[dict[str, Any]]:
    return [
        # S1 from the first evaluation: 2h = 6h = 1d = 3d = 1.5%; true at 5m, pending at 10m either way.
        check(alert, "10m"),
        check(alert, "400m", _burn(alert, s1, "1.5%")),
        # 900m, 60 steps after S1 ended: 6h (73 records of one step each, 540m..900m) =
        # (13*15 + 60*5) / 73000 = 0.68% < 1% ends the ticket, while 3d (all 180 steps) =
        # (120*15 + 60*5) / 180000 = 1.17% still burns.
        check(alert, "900m"),
        # S3 at step 192 + b: 1d (289 records) = (50(289 - b) + 40b) / (10000(289 - b) + 1000b) > 3%
        # from b = 278 (260b > 72250), at 2350m; b = 277 gives 11680 / 397000 = 2.94%.
        check(alert, "2345m"),
        check(alert, "2355m"),  # pending since 2350m (or 2355m)
        check(alert, "2410m", _burn(alert, s3, "4%")),  # 1d all at 4% at 2405m and 2410m
        # 2470m: 2h (25 records) = (13*40 + 12*5) / 25000 = 2.32% < 3% ends the ticket although
        # 1d (289 records) = (277*40 + 12*5) / 289000 = 3.85%.
        check(alert, "2470m"),
    ]


def _slow_burn_exprs(alert: str, sli: str, s3: str, s1: str) -> list[dict[str, Any]]:
    return [
        alert_state(alert, s1, "10m"),
        # 400m: 1d at 1.5% < 3%, so only the 1x pair matches.
        *ratios(sli, s1, "400m", w2h=0.015, w6h=0.015, w1d=0.015, w3d=0.015),
        *ratios(sli, s1, "900m", w6h=0.0068, w3d=0.0117),
        alert_state(alert, s3, "2355m"),
        # 2410m: 3d (all 482 steps) = (192*50 + 290*40) / (192*10000 + 290*1000) = 21200 / 2210000 = 0.96%
        # < 1%: only the 3x pair matches.
        *ratios(sli, s3, "2410m", w2h=0.04, w6h=0.04, w1d=0.04, w3d=0.0096),
        *ratios(sli, s3, "2470m", w2h=0.0232, w1d=0.0385),
        *ratios(sli, "llama", f"{SLOW_STEPS * 5}m", **{f"w{w}": 0.005 for w in WINDOWS}),
    ]


def slow_burn() -> dict[str, Any]:
    return burn_case(
        "SLO slow burn: 3x pair (1d & 2h) and 1x pair (3d & 6h)",
        "Slow",
        _burn_series(S3, S1, SLOW_STEPS),
        checks=_slow_burn_checks,
        exprs=_slow_burn_exprs,
        interval="5m",
    )


CASES = [fast_burn(), slow_burn()]


@pytest.mark.e2e
def test_slo_fast_burn(tmp_path: Path) -> None:
    run_promtool_at("1m", CASES, tmp_path)


@pytest.mark.e2e
def test_slo_slow_burn(tmp_path: Path) -> None:
    run_promtool_at("5m", CASES, tmp_path)
