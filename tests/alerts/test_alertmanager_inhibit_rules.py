"""The built configuration's inhibit rules, structurally: which alert silences which, on what labels."""

from __future__ import annotations

from typing import Any

from tests.alerts.alertmanager import ALERTS, built

OURS = 'bundle="servescope"'
HARDWARE = (
    'alertname=~"ServescopeGpuEccUncorrectable|ServescopeGpuLost|ServescopeGpuRowRemapFailed|'
    'ServescopeGpuXidCritical"'
)
COMBINED = 'alertname=~"ServescopeGpuSaturatedKvPressure|ServescopeKvPressureHurtingRequests"'
MEMORY = (
    'alertname=~"ServescopeEngineOverMemoryBudget|ServescopeGpuMemoryHeadroomLow|'
    'ServescopeGpuMemoryLeakSuspected"'
)
SOURCES_DOWN = 'alertname=~"ServescopeSourceDown|ServescopeSourceStale"'
ON_GPU = ["instance", "uuid"]
ON_ENGINE = ["instance", "model_name", "engine", "endpoint"]
ON_MODEL = ["model_name"]
# (source matchers, target matchers, equal) of each rule in order, the bundle's own matcher left out.
EXPECTED = [
    ([HARDWARE], ['severity=~"warning|info"'], ON_GPU),
    (['alertname="ServescopeGpuLost"'], ['alertname!="ServescopeGpuLost"'], ON_GPU),
    (['alertname="ServescopeGpuMemoryExhaustionSoon"'], [MEMORY], ON_GPU),
    (['alertname="ServescopeGpuSaturatedKvPressure"'], ['alertname="ServescopeGpuSaturated"'], ON_GPU),
    ([COMBINED], ['alertname="ServescopeKvCachePressure"'], ON_ENGINE),
    (
        ['alertname="ServescopeKvPressureHurtingRequests"'],
        ['alertname="ServescopeGpuSaturatedKvPressure"'],
        ON_ENGINE,
    ),
    (
        ['alertname="ServescopeTtftSloBurnFast"'],
        ['alertname=~"ServescopeTtftP99High|ServescopeTtftSloBurnSlow"'],
        ON_MODEL,
    ),
    (['alertname="ServescopeE2eSloBurnFast"'], ['alertname="ServescopeE2eSloBurnSlow"'], ON_MODEL),
    (
        ['alertname="ServescopeExporterDown"'],
        ['alertname=~"ServescopeServingEndpointDown|ServescopeSourceDown|ServescopeSourceStale"'],
        ["job", "instance"],
    ),
    (['alertname="ServescopeGpuNodeNvmlLost"'], [SOURCES_DOWN, 'source="nvml"'], ["instance"]),
]


def inhibit_rules() -> list[dict[str, Any]]:
    return list(built()["inhibit_rules"])


def test_inhibit_rules() -> None:
    assert [
        (rule["source_matchers"], rule["target_matchers"], rule["equal"]) for rule in inhibit_rules()
    ] == [([OURS, *sources], [OURS, *targets], equal) for sources, targets, equal in EXPECTED]


def _names(matcher: str) -> list[str]:
    label, _, value = matcher.partition("=")
    return value.lstrip("~").strip('"').split("|") if label.rstrip("!") == "alertname" else []


def test_inhibit_rules_name_alerts_of_the_bundle() -> None:
    """A renamed alert must not leave an inhibition matching nothing."""
    for rule in inhibit_rules():
        for matcher in (*rule["source_matchers"], *rule["target_matchers"]):
            for name in _names(matcher):
                assert name in ALERTS, f"inhibit rule {rule} names {name}, which the bundle lacks"


def test_inhibit_sources_carry_the_equal_labels() -> None:
    """An `equal` label the source lacks would make the rule silence only targets that lack it too.

    The labels an alert carries are the keys its links are built from (GPU_KEYS, ENGINE_KEYS, ...).
    """
    for rule in inhibit_rules():
        sources = [n for m in rule["source_matchers"] for n in _names(m)]
        for name in sources:
            carried = {*ALERTS[name].keys, "job"}
            assert set(rule["equal"]) <= carried, (name, rule["equal"], carried)
