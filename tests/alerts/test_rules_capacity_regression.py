"""promtool cases for the weekly capacity regression (group servescope-capacity-regression).

The CronJob writes one sample per weekly run (remote write, at the run's end): here a run at minute 10
says 1 (a regression), one at minute 20 a week later says 0. The alert fires `for` after the 1 arrives,
not before, holds between the runs, and clears once the next run says 0; a 0 alone never fires it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerts.promtool import case, check, firing, run_promtool, series

ALERT = "ServescopeCapacityRegression"
RUN = {"target": "staging", "label": "staging"}
DESCRIPTION = (
    "The weekly capacity run against staging (staging) no longer serves its baseline's load within the SLO: "
    "more than 10% of capacity lost, beyond the noise of the measurement (capacity compare)."
)
WEEK = 7 * 24 * 60  # minutes
# One sample at minute 10 (the first run) and one at a week and 10 minutes (the next run), stale between.
REGRESSED_THEN_FIXED = f"_x10 1 _x{WEEK - 1} 0"

CASES = [
    case(
        f"{ALERT}: a run says regression, the next week's run says it is gone",
        [series("servescope_capacity_regression", RUN, REGRESSED_THEN_FIXED)],
        check(ALERT, "5m"),  # before the run
        check(ALERT, "12m"),  # written, pending for less than `for` (5m)
        check(ALERT, "20m", firing(ALERT, RUN, DESCRIPTION)),
        check(ALERT, f"{3 * 24 * 60}m", firing(ALERT, RUN, DESCRIPTION)),  # between the runs
        check(ALERT, f"{WEEK + 20}m"),  # the next run says 0
    ),
    case(
        f"{ALERT}: a run with no regression",
        [series("servescope_capacity_regression", RUN, "_x10 0")],
        check(ALERT, "30m"),
    ),
]


@pytest.mark.e2e
def test_capacity_regression(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path, evaluation_interval="1m")
