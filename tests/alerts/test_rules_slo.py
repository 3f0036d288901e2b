"""promtool cases for the latency SLO burn rates: recording rules (servescope-slo-records) and the burn
alerts (servescope-slo), fast burn here, slow burn in test_rules_slo_slow.py; the P99 and bucket-layout
cases are in test_rules_slo_p99.py.

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

from pathlib import Path

import pytest

from tests.alerts.promtool import run_promtool
from tests.alerts.slo import BASE, Burn, burn_case

# (requests, requests under the bound) per scrape interval.
BURST = (1000, 800)  # 20%: above 14.4x
MID = (1000, 930)  # 7%: between 6x and 14.4x

# --- fast burn (page, for 2m): 1 min samples and evaluations, 252 min -----------------------------------
# S6 (the 6x pair alone): 7% from the start to 60m, 0.5% after. Errors per minute: 70, 5.
# From the first evaluation: 5m = 30m = 1h = 6h = 7%; true at 1m, pending at 2m either way. At 30m, 1h at
# 7% < 14.4%, so only the 6x pair matches.
# 68m, 8 min after S6 ended: 30m (5-rate sum over the 31 records 38m..68m: 23 of 5 minutes at 70 errors,
# then 4 + 3 + 2 + 1 more minutes at 70, the other 30 minutes at 5) = (125*70 + 30*5) / 155000 = 5.74% <
# 6%, while 6h = 6.41% still burns: the short window ends the condition (from 67m); keep_firing_for 15m
# holds the page (a burn that dips under its rate within it is one page: still firing at 68m and 80m),
# which resolves from 82m: silent at 84m.
S6_WINDOWS = {
    "30m": {"w5m": 0.07, "w30m": 0.07, "w1h": 0.07, "w6h": 0.07},
    "68m": {"w30m": 0.0574, "w6h": 0.0641},
}
S6 = Burn([(60, MID), (192, BASE)], "7%", ("2m",), "30m", "84m", S6_WINDOWS, kept=("68m", "80m"))
# S14 (the 14.4x pair alone): 0.5% to 180m, 20% from 181m to 245m, 0.5% after. Errors per minute: 5, 200.
# At 180m + b the 5-rate sum of 1h is over 14.4% from b = 46 (14.57%); b = 45 gives 14.25%: silent at 225m,
# pending since 226m (or 227m) at 227m. 1h all at 20% at 244m and 245m: firing at 245m, where 6h (all 245
# min; the first 4 records hold fewer minutes) = 5.56% < 6%: only the 14.4x pair matches.
# 251m: 5m = 0.5% ends the condition although 1h = (54*200 + 6*5) / 60000 = 18.05% (18.72% in the 5-rate
# sum); kept firing for 15m, the page resolves from 266m: silent at 268m.
S14_WINDOWS = {
    "245m": {"w5m": 0.2, "w30m": 0.2, "w1h": 0.2, "w6h": 0.0556},
    "251m": {"w5m": 0.005, "w1h": 0.1872},
}
S14_PHASES = [(180, BASE), (65, BURST), (7, BASE)]
S14 = Burn(S14_PHASES, "20%", ("225m", "227m"), "245m", "268m", S14_WINDOWS, kept=("251m",))
FAST_BURN = "SLO fast burn: 14.4x pair (1h & 5m) and 6x pair (6h & 30m)"
CASES = [burn_case(FAST_BURN, "Fast", "1m", 252, early=S6, late=S14)]


@pytest.mark.e2e
def test_slo_fast_burn(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path, evaluation_interval="1m")
