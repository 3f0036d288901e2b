"""The promtool cases run on the groups they depend on only: that cut must never leave out a rule a
case's alert reads, or the cases would test another bundle than the one shipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.alerts.promtool import ALERTS, NAME, RULES, check, groups_needed_by, names_read


def _kept(tmp_path: Path, *tests: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    path = groups_needed_by(list(tests), RULES, tmp_path)
    return {group["name"]: group["rules"] for group in yaml.safe_load(path.read_text())["groups"]}


def _case(*alerts: str, exprs: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "alert_rule_test": [check(alert, "1m") for alert in alerts],
        "promql_expr_test": [{"expr": expr, "eval_time": "1m", "exp_samples": []} for expr in exprs],
    }


def test_a_self_contained_group_is_run_alone(tmp_path: Path) -> None:
    kept = _kept(tmp_path, _case("ServescopeThroughputBelowBaseline"))
    assert list(kept) == ["servescope-capacity-baseline"]


def test_an_alert_on_recorded_ratios_keeps_the_groups_that_record_them(tmp_path: Path) -> None:
    kept = _kept(tmp_path, _case("ServescopeTtftSloBurnFast"))
    assert {"servescope-slo", "servescope-slo-records"} <= set(kept), list(kept)
    assert "servescope-gpu-health" not in kept


def test_every_alert_keeps_each_rule_it_reads(tmp_path: Path) -> None:
    full = yaml.safe_load(RULES.read_text())["groups"]
    defined_in = {
        group["name"]: {rule.get("alert") or rule["record"] for rule in group["rules"]} for group in full
    }
    for alert in ALERTS:
        kept = _kept(tmp_path, _case(alert))
        read = {name for group in kept.values() for rule in group for name in names_read(rule)} | {alert}
        # Group-wise: a name defined in two groups needs both, not just one of them.
        needed = {group for group, names in defined_in.items() if names & read}
        assert needed <= set(kept), f"{alert}: reads from groups left out: {sorted(needed - set(kept))}"


def test_reading_one_alerts_series_keeps_that_alerts_groups(tmp_path: Path) -> None:
    expr = 'max_over_time(ALERTS{alertname="ServescopeThroughputBelowBaseline", alertstate="pending"}[1h])'
    assert list(_kept(tmp_path, _case(exprs=(expr,)))) == ["servescope-capacity-baseline"]


def test_reading_alerts_of_any_name_keeps_the_whole_bundle(tmp_path: Path) -> None:
    for expr in (
        'ALERTS{alertstate="firing"}',
        'ALERTS{alertname="ServescopeGpuLost"} or ALERTS_FOR_STATE',  # one read names no alert
        'ALERTS{alertname=~"ServescopeGpu.*"}',  # a pattern: which alerts is not read here
    ):
        assert "ALERTS" in NAME.findall(expr)
        assert groups_needed_by([_case(exprs=(expr,))], RULES, tmp_path) == RULES, expr


def test_a_name_recorded_in_two_groups_keeps_both(tmp_path: Path) -> None:
    def group(name: str, *rules: dict[str, str]) -> dict[str, Any]:
        return {"name": name, "rules": list(rules)}

    rules = tmp_path / "rules.yaml"
    document = {
        "groups": [
            group("first", {"record": "job:shared:sum", "expr": "sum(a)"}),
            group("second", {"record": "job:shared:sum", "expr": "sum(b)"}),
            group("alerting", {"alert": "SharedHigh", "expr": "job:shared:sum > 1"}),
            group("unrelated", {"record": "job:other:sum", "expr": "sum(c)"}),
        ]
    }
    rules.write_text(yaml.safe_dump(document, sort_keys=False))
    path = groups_needed_by([_case("SharedHigh")], rules, tmp_path)
    kept = [group["name"] for group in yaml.safe_load(path.read_text())["groups"]]
    assert kept == ["first", "second", "alerting"]
