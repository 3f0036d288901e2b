"""Every alert of the bundle has promtool cases: firing, silent before `for` elapses, and recovered."""

from __future__ import annotations

import importlib
from collections import Counter
from pathlib import Path
from typing import Any

from tests.alerts.promtool import ALERTS

MODULES = sorted(p.stem for p in Path(__file__).parent.glob("test_rules_*.py"))


def _checks() -> list[dict[str, Any]]:
    found = []
    for name in MODULES:
        module = importlib.import_module(f"tests.alerts.{name}")
        for group in getattr(module, "CASES", []):
            found += group.get("alert_rule_test", [])
    return found


def test_every_alert_fires_and_stays_silent_in_some_case() -> None:
    checks = _checks()
    firing = Counter(c["alertname"] for c in checks if c.get("exp_alerts"))
    silent = Counter(c["alertname"] for c in checks if not c.get("exp_alerts"))
    missing = sorted(
        name for name in ALERTS if firing[name] < 1 or (silent[name] < 2 and name != "ServescopeWatchdog")
    )
    assert not missing, f"alerts without firing + 2 silent promtool cases: {missing}"
    unknown = sorted((set(firing) | set(silent)) - set(ALERTS))
    assert not unknown, f"cases for alerts the bundle does not define: {unknown}"


def test_every_firing_case_asserts_the_runbook_url() -> None:
    for check in _checks():
        for alert in check.get("exp_alerts", []):
            assert "runbook_url" in alert.get("exp_annotations", {}), check["alertname"]
