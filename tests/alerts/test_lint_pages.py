"""Every page requires a symptom on an SLO: the linter's alerts/page-symptom over the built bundles, and
over expressions that page on a cause alone (as the KV page did, on a queue or preemptions)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servescope.bundle.alerts.bundle import all_alerts, groups
from servescope.bundle.alerts.lint import lint
from servescope.bundle.alerts.model import Record
from servescope.bundle.alerts.promql import Node, parse_promql
from servescope.bundle.alerts.symptom import reads_only_blindness, requires_symptom
from servescope.core.config import AlertsConfig
from tests.alerts.linting import GOOD, checks

RATIO_5M = "model:servescope_ttft_slo_errors:ratio_rate5m"
RATIO_1H = "model:servescope_ttft_slo_errors:ratio_rate1h"
KV = 'servescope_serving_kv_cache_usage_ratio{job="servescope"}'
WAITING = 'servescope_serving_requests_waiting{job="servescope"}'
PREEMPTED = 'rate(servescope_serving_preemptions_total{job="servescope"}[5m]) > 0.1'
# The KV page as it was: a queue, or preemptions, or a burn: any one of them paged.
CAUSE_OR_SYMPTOM = (
    f"(min_over_time({WAITING}[5m]) > 0 or {PREEMPTED} or ({KV} and on (model_name) {RATIO_5M} > 0.144))"
)
BUNDLES = [
    AlertsConfig(engine_topology=topology, kube_state_metrics=ksm, fleet_by=fleet)
    for topology in ("exporter", "podmonitor")
    for ksm in (True, False)
    for fleet in ((), ("cluster",))
]


@pytest.mark.parametrize(
    "cfg", BUNDLES, ids=lambda c: f"{c.engine_topology}-ksm{c.kube_state_metrics}-{c.fleet_by}"
)
def test_every_page_of_every_build_requires_a_symptom_or_is_blindness(cfg: AlertsConfig) -> None:
    pages = [a for a in all_alerts(cfg) if a.severity == "critical"]
    records: dict[str, list[Node]] = {}
    for group in groups(cfg):
        for rule in group.rules:
            if isinstance(rule, Record):
                records.setdefault(rule.name, []).append(parse_promql(rule.expr))
    kinds = {
        a.name: (requires_symptom(parse_promql(a.expr), records), reads_only_blindness(parse_promql(a.expr)))
        for a in pages
    }
    assert all(symptom or blind for symptom, blind in kinds.values()), kinds
    assert sum(symptom for symptom, _ in kinds.values()) >= 4  # the latency, KV and availability pages
    assert sum(blind for _, blind in kinds.values()) == 2  # the fleet blind, the targets gone
    # The canary page requires its revision's own burn (model_revision:*_slo_errors:paging_burn).
    assert kinds["ServescopeCanarySloBurn"] == (True, False)
    assert [p for p in lint(groups(cfg), cfg) if p.check == "alerts/page-symptom"] == []


@pytest.mark.parametrize(
    "expr",
    [
        CAUSE_OR_SYMPTOM,
        f"{KV} > 0.7",  # a cause alone
        f"{KV} > 0.7 unless on (model_name) {RATIO_5M} > 0.144",  # unless is not and
        f"absent({RATIO_5M})",
        'servescope_gpu_up{job="servescope"} == 0',  # a lost GPU: a cause, however bad
        f"{RATIO_5M} > 0.144 or {KV} > 0.9",  # one branch without the symptom
    ],
)
def test_a_page_on_a_cause_is_flagged(expr: str) -> None:
    assert _page_checks(expr, "critical") == {"alerts/page-symptom"}
    assert _page_checks(expr, "warning") == set()  # as a ticket it is fine


@pytest.mark.parametrize(
    "expr",
    [
        f"{KV} > 0.7 and on (model_name) ({RATIO_1H} > 0.144 and {RATIO_5M} > 0.144)",
        f"max by (model_name) (last_over_time({RATIO_5M}[10m])) > 0.144",
        f"({RATIO_5M} > 0.144 and {RATIO_1H} > 0.144) or ({RATIO_5M} > 0.06 and {RATIO_1H} > 0.06)",
        "avg_over_time(model:servescope_availability_errors:ratio[1h]) > 0.144",
        'absent(up{job="servescope"})',  # blindness
        '1 - count(up{job="servescope"} == 1) / count(kube_node_info) >= 0.5',
    ],
)
def test_a_page_on_a_symptom_or_on_blindness_passes(expr: str) -> None:
    assert _page_checks(expr, "critical") == set()


def test_a_record_counts_as_the_symptom_it_requires() -> None:
    """A page on a record: passes when every rule recording it requires a symptom (a canary revision's
    burn over its windows), fails when it records a cause."""
    burn = Record(
        "model_revision:servescope_ttft_slo_errors:paging_burn",
        "model_revision:servescope_ttft_slo_errors:ratio_rate1h > 0.144"
        " and model_revision:servescope_ttft_slo_errors:ratio_rate5m > 0.144",
    )
    queue = Record("model:servescope_queue:waiting", f"max by (model_name) ({WAITING}) > 0")
    page = replace(GOOD, severity="critical", expr=f"{burn.name} > 0")
    assert "alerts/page-symptom" not in checks(burn, page)
    assert "alerts/page-symptom" in checks(queue, replace(page, expr=f"{queue.name} > 0"))
    # A record of either is no symptom: one branch may hold without it.
    either = Record("model:servescope_either:any", f"{burn.name} or {queue.name}")
    assert "alerts/page-symptom" in checks(burn, queue, either, replace(page, expr=either.name))


def _page_checks(expr: str, severity: str) -> set[str]:
    """The checks GOOD with `expr` and `severity` fails; a lone group does not record the bundle's
    records, so their names are unknown to it."""
    return checks(replace(GOOD, severity=severity, expr=expr)) - {"promql/unknown-metric"}
