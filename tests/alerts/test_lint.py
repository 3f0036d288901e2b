"""The offline rule linter: the bundle is clean, and each check of its labels, annotations, `for` and
names catches the rule it is about. Its PromQL checks are in test_lint_promql.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from servescope.bundle.alerts import BUILD_DIR as ALERTS_BUILD
from servescope.bundle.alerts.bundle import groups, rule_file
from servescope.bundle.alerts.lint import LintProblem, lint, lint_document, lint_rule_file
from servescope.bundle.alerts.model import Group, Record
from servescope.core.config import AlertsConfig
from tests.alerts.linting import CONFIG, GOOD, checks, document_checks, rendered

# --- the real bundle ---------------------------------------------------------------------------------


def test_bundle_has_no_problems() -> None:
    assert lint(groups(CONFIG), CONFIG) == []


@pytest.mark.parametrize(
    "config",
    [
        AlertsConfig(fleet_by=("cluster",), p99_histogram="itl", exhaustion_window="5m"),
        AlertsConfig(selector='job="gpu-exporter",namespace=~"ml|serving"', p99_histogram="e2e"),
        AlertsConfig(runbook_base_url="https://runbooks.example.com", dashboard_base_url="https://g.example"),
    ],
)
def test_bundle_has_no_problems_with_other_settings(config: AlertsConfig) -> None:
    assert lint(groups(config), config) == []


@pytest.mark.parametrize("name", ["rules.yaml", "prometheusrule.yaml"])
def test_built_files_have_no_problems(name: str) -> None:
    assert lint_rule_file(ALERTS_BUILD / name) == []


def test_lint_rule_file_reports_what_it_reads(tmp_path: Path) -> None:
    document = rule_file(CONFIG)
    document["groups"][0]["rules"].append(rendered(expr="servescope_serving_preemptions_total > 0"))
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(document))
    problems = lint_rule_file(path)
    assert problems == [
        LintProblem(
            "ServescopeLintExample",
            "promql/counter",
            "counter servescope_serving_preemptions_total is read bare: "
            "wrap it in rate(), irate(), increase() or resets()",
        )
    ]
    assert str(problems[0]).startswith("ServescopeLintExample: [promql/counter] counter ")


def test_the_example_rule_is_clean() -> None:
    assert checks(GOOD) == set()
    assert document_checks(rendered()) == set()


# --- labels and annotations --------------------------------------------------------------------------


@pytest.mark.parametrize("severity", ["page", "", None])
def test_severity_outside_the_three(severity: str | None) -> None:
    rule = rendered()
    rule["labels"] = {"severity": severity} if severity is not None else {}
    assert document_checks(rule) == {"alerts/severity"}


def test_summary_missing() -> None:
    rule = rendered()
    del rule["annotations"]["summary"]
    assert document_checks(rule) == {"alerts/summary"}


def test_summary_templated() -> None:
    assert checks(replace(GOOD, summary="GPU {{ $labels.gpu }} is lost.")) == {"alerts/summary"}


def test_description_missing() -> None:
    assert checks(replace(GOOD, description="  ")) == {"alerts/description"}


def test_runbook_url_missing() -> None:
    rule = rendered()
    del rule["annotations"]["runbook_url"]
    assert document_checks(rule) == {"alerts/runbook-url"}


@pytest.mark.parametrize(
    "url",
    [
        "http://servescope-runbooks.monitoring.svc:9110/runbooks/ServescopeGpuLost",  # another alert's
        "http://servescope-runbooks.monitoring.svc:9110/runbooks/ServescopeLintExampleX",
        "https://wiki.example.com/runbooks/ServescopeLintExample",
    ],
)
def test_runbook_url_elsewhere(url: str) -> None:
    rule = rendered()
    rule["annotations"]["runbook_url"] = url
    assert document_checks(rule) == {"alerts/runbook-url"}


def test_runbook_url_with_label_query_is_fine() -> None:
    url = GOOD.render(CONFIG)["annotations"]["runbook_url"]
    assert url.startswith(f"{CONFIG.runbook_base_url}/runbooks/ServescopeLintExample?instance=")


def test_runbook_url_checked_against_the_config() -> None:
    other = AlertsConfig(runbook_base_url="https://runbooks.example.com")
    problems = lint_document({"groups": [{"name": "t", "rules": [rendered()]}]}, other)
    assert {p.check for p in problems} == {"alerts/runbook-url"}


def test_dashboard_url_missing() -> None:
    rule = rendered()
    del rule["annotations"]["dashboard_url"]
    assert document_checks(rule) == {"alerts/dashboard-url"}


@pytest.mark.parametrize("value", ["{{ $value }}", "$value", "{{ $labels.gpu }}-hot"])
def test_templated_label(value: str) -> None:
    assert checks(replace(GOOD, labels={"value": value})) == {"alerts/labels-template"}


# --- for ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("for_", ["12h", "6h1m", "1d"])
def test_for_too_long(for_: str) -> None:
    assert checks(replace(GOOD, for_=for_)) == {"alerts/for"}


@pytest.mark.parametrize("for_", ["0s", "0m"])
def test_for_zero_only_for_watchdog(for_: str) -> None:
    assert checks(replace(GOOD, for_=for_)) == {"alerts/for"}
    assert checks(replace(GOOD, name="ServescopeWatchdog", for_=for_, expr="vector(1)")) == set()


@pytest.mark.parametrize("for_", ["6h", "1h30m", "30s"])
def test_for_within_bounds(for_: str) -> None:
    assert checks(replace(GOOD, for_=for_)) == set()


def test_for_missing_or_malformed() -> None:
    assert document_checks(rendered(**{"for": None})) == {"alerts/for"}
    assert document_checks(rendered(**{"for": "five minutes"})) == {"alerts/for"}


# --- names --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["servescope_kv_usage_avg5m", "engine:servescope_kv_usage", "a:b:c:d", "1x:y:z"]
)
def test_record_name_not_level_metric_operations(name: str) -> None:
    assert checks(Record(name, "avg_over_time(servescope_serving_kv_cache_usage_ratio[5m])")) == {
        "rules/record-name"
    }


@pytest.mark.parametrize(
    "name", ["GpuLost", "ServescopegpuLost", "Servescope_gpu_lost", "servescopeGpuLost", "ServescopeGPU-Lost"]
)
def test_alert_name_not_camel_case_with_prefix(name: str) -> None:
    assert checks(replace(GOOD, name=name)) == {"rules/alert-name"}


def test_duplicate_names() -> None:
    problems = lint([Group("a", (GOOD,)), Group("b", (GOOD,))], CONFIG)
    assert [(p.rule, p.check) for p in problems] == [("ServescopeLintExample", "rules/duplicate")]
    record = Record(
        "engine:servescope_kv_cache_usage:avg5m", "avg_over_time(servescope_serving_kv_cache_usage_ratio[5m])"
    )
    assert checks(record, record) == {"rules/duplicate"}


def test_rule_without_alert_or_record() -> None:
    assert document_checks({"expr": "up == 0"}) == {"rules/shape"}
    assert document_checks({"alert": "ServescopeX"}) == {"rules/shape"}
