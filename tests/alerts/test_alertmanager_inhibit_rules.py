"""The built configuration's inhibit rules, structurally: which alert silences which, on what labels."""

from __future__ import annotations

from typing import Any

from tests.alerts.alertmanager import ALERTS, built

OURS = 'bundle="servescope"'
HARDWARE = (
    'alertname=~"ServescopeGpuEccUncorrectable|ServescopeGpuLost|ServescopeGpuRowRemapFailed|'
    'ServescopeGpuXidCritical"'
)
MEMORY = (
    'alertname=~"ServescopeEngineOverMemoryBudget|ServescopeGpuMemoryHeadroomLow|'
    'ServescopeGpuMemoryLeakSuspected"'
)
SOURCES_DOWN = 'alertname=~"ServescopeSourceDown|ServescopeSourceStale"'
PAGES = (
    'alertname=~"ServescopeAvailabilitySloBurnFast|ServescopeCanarySloBurn|ServescopeE2eSloBurnFast|'
    'ServescopeKvPressureHurtingRequests|ServescopeTtftSloBurnFast"'
)
BLIND = 'alertname=~"ServescopeExporterTargetsAbsent|ServescopeMonitoringBlind"'
BLIND_PARTS = (
    "ServescopeAgentShardSilent",
    "ServescopeDerivedMetricsAbsent",
    "ServescopeExporterDown",
    "ServescopeGpuMetricsAbsent",
    "ServescopeGpuNodeWithoutExporter",
    "ServescopeServingEndpointDown",
    "ServescopeServingMetricsAbsent",
    "ServescopeSourceDown",
    "ServescopeSourceStale",
)
ON_GPU = ["instance", "uuid"]
ON_ENGINE = ["instance", "model_name", "engine", "endpoint"]
ON_MODEL = ["model_name"]
# (source matchers, target matchers, equal) of each rule in order, the bundle's own matcher left out; the
# model's tickets are checked on their own below.
EXPECTED = [
    ([PAGES], None, ON_MODEL),
    (
        ['alertname="ServescopeKvPressureHurtingRequests"'],
        ['alertname="ServescopeTtftSloBurnFast"'],
        ON_MODEL,
    ),
    ([BLIND], [f'alertname=~"{"|".join(BLIND_PARTS)}"'], []),
    (['alertname="ServescopeExporterTargetsAbsent"'], ['alertname="ServescopeMonitoringBlind"'], []),
    ([HARDWARE], ['severity=~"warning|info"', "alertname!~" + HARDWARE.split("=~")[1]], ON_GPU),
    (['alertname="ServescopeGpuLost"'], ['alertname!="ServescopeGpuLost"'], ON_GPU),
    (['alertname="ServescopeGpuMemoryExhaustionSoon"'], [MEMORY], ON_GPU),
    (
        ['alertname="ServescopeGpuSaturatedKvPressure"'],
        ['alertname="ServescopeGpuSaturated"'],
        ["instance", "hostname"],
    ),
    (['alertname="ServescopeGpuSaturatedKvPressure"'], ['alertname="ServescopeKvCachePressure"'], ON_ENGINE),
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
    found = [(rule["source_matchers"], rule["target_matchers"], rule["equal"]) for rule in inhibit_rules()]
    assert len(found) == len(EXPECTED)
    for (sources, targets, equal), (want_sources, want_targets, want_equal) in zip(
        found, EXPECTED, strict=True
    ):
        assert (sources, equal) == ([OURS, *want_sources], want_equal)
        if want_targets is not None:
            assert targets == [OURS, *want_targets]


def test_a_page_of_a_model_mutes_every_ticket_about_that_model() -> None:
    """The causes a page explains: every ticket that carries the model (its engines, endpoints, SLOs)."""
    (targets,) = inhibit_rules()[0]["target_matchers"][1:]
    muted = set(_names(targets))
    with_model = {name for name, a in ALERTS.items() if a.severity == "warning" and "model_name" in a.keys}
    assert muted == with_model | {"ServescopeServingEndpointDown"}
    assert {
        "ServescopeKvCachePressure",
        "ServescopeRequestQueueBuilding",
        "ServescopePreemptionsSustained",
    } <= muted
    assert not {name for name in muted if ALERTS[name].severity == "critical"}


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
