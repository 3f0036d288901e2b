"""promtool case of ServescopeGpuXidCritical kept for a day: an XID stays until the GPU is reset
(keep_firing_for 24h), so the case spans a day at 5 min samples and evaluations.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerts.inputs import xid_description, xid_event
from tests.alerts.promtool import GPU, case, check, fires, run_promtool

XID = "ServescopeGpuXidCritical"
XID_79 = {**GPU, "xid": "79"}
XID_KEPT = case(
    f"{XID}: kept for a day after the event",
    xid_event(XID_79, "_x2 1x300", "_x2 600x300"),
    check(XID, "5m"),
    check(XID, "10m"),  # pending
    fires(XID, "12h", XID_79, xid_description("79")),
    # The condition ended at 20m (the event left the window): resolved 24 h later.
    check(XID, "24h25m"),
    interval="5m",
)
CASES = [XID_KEPT]


@pytest.mark.e2e
def test_xid_kept_until_reset(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path, evaluation_interval="5m")
