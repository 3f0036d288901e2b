"""promtool case for the latency SLO slow burn (ticket, for 15m): the 3x pair (1d & 2h) and the 1x pair (3d &
6h), each firing alone. The objective, the arithmetic and the models are explained in test_rules_slo.py.

5 min samples and evaluations over 2470 min (41 h).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerts.promtool import run_promtool
from tests.alerts.slo import BASE, Burn, burn_case

# (requests, requests under the bound) per scrape interval.
SLOW_MID = (1000, 960)  # 4%: between 3x and 6x
LOW = (1000, 985)  # 1.5%: between 1x and 3x
BUSY = (10000, 9950)  # 0.5% at ten times the traffic

# S1 (the 1x pair alone): 1.5% for 10 h (120 steps), 0.5% after. Errors per step: 15, 5.
# From the first evaluation: 2h = 6h = 1d = 3d = 1.5%; true at 5m, pending at 10m either way. At 400m, 1d
# at 1.5% < 3%, so only the 1x pair matches.
# 900m, 60 steps after S1 ended: 6h (73 records of one step each, 540m..900m) = (13*15 + 60*5) / 73000 =
# 0.68% < 1% ends the ticket, while 3d (all 180 steps) = (120*15 + 60*5) / 180000 = 1.17% still burns.
S1_WINDOWS = {
    "400m": {"w2h": 0.015, "w6h": 0.015, "w1d": 0.015, "w3d": 0.015},
    "900m": {"w6h": 0.0068, "w3d": 0.0117},
}
S1 = Burn([(120, LOW), (374, BASE)], "1.5%", ("10m",), "400m", "900m", S1_WINDOWS)
# S3 (the 3x pair alone): 0.5% at ten times the traffic for 16 h (192 steps), 4% for 24h10m (290 steps, to
# 2410m), 0.5% after. Errors per step: 50 (of 10000), 40, 5. With steady traffic a 1d ratio over 3% would
# drag the 3d ratio over 1% too; the busy hours before keep it under, so the 3x pair fires on its own.
# At step 192 + b: 1d (289 records) = (50(289 - b) + 40b) / (10000(289 - b) + 1000b) > 3% from b = 278
# (260b > 72250), at 2350m; b = 277 gives 11680 / 397000 = 2.94%: silent at 2345m, pending since 2350m (or
# 2355m) at 2355m. 1d all at 4% at 2405m and 2410m: firing at 2410m, where 3d (all 482 steps) = (192*50 +
# 290*40) / (192*10000 + 290*1000) = 21200 / 2210000 = 0.96% < 1%: only the 3x pair matches.
# 2470m: 2h (25 records) = (13*40 + 12*5) / 25000 = 2.32% < 3% ends the ticket although 1d (289 records) =
# (277*40 + 12*5) / 289000 = 3.85%.
S3_WINDOWS = {
    "2410m": {"w2h": 0.04, "w6h": 0.04, "w1d": 0.04, "w3d": 0.0096},
    "2470m": {"w2h": 0.0232, "w1d": 0.0385},
}
S3 = Burn([(192, BUSY), (290, SLOW_MID), (12, BASE)], "4%", ("2345m", "2355m"), "2410m", "2470m", S3_WINDOWS)
SLOW_BURN = "SLO slow burn: 3x pair (1d & 2h) and 1x pair (3d & 6h)"
CASES = [burn_case(SLOW_BURN, "Slow", "5m", 494, early=S1, late=S3)]


@pytest.mark.e2e
def test_slo_slow_burn(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path, evaluation_interval="5m")
