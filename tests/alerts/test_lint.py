"""The offline rule linter: the bundle is clean, and each check catches the rule it is about."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from servescope.alerts import BUILD_DIR as ALERTS_BUILD
from servescope.alerts.bundle import groups, rule_file
from servescope.alerts.config import AlertsConfig
from servescope.alerts.lint import LintProblem, lint, lint_document, lint_rule_file
from servescope.alerts.model import GPU_KEYS, Alert, Group, Record

ROOT = Path(__file__).resolve().parents[2]
CONFIG = AlertsConfig()
GOOD = Alert(
    "ServescopeLintExample",
    'servescope_gpu_up{job="servescope"} == 0',
    "5m",
    "warning",
    "A GPU is lost.",
    "{{ $labels.hostname }} GPU {{ $labels.gpu }} is lost.",
    GPU_KEYS,
    "gpu",
)
TTFT_BUCKET = 'servescope_serving_time_to_first_token_seconds_bucket{job="servescope"}'


def checks(*rules: Alert | Record, config: AlertsConfig = CONFIG) -> set[str]:
    return {problem.check for problem in lint([Group("test", rules)], config)}


def expr_checks(expr: str) -> set[str]:
    return checks(replace(GOOD, expr=expr))


def rendered(**changes: Any) -> dict[str, Any]:
    """GOOD as rules.yaml holds it, with top-level keys changed (None deletes the key)."""
    rule = GOOD.render(CONFIG)
    for key, value in changes.items():
        if value is None:
            rule.pop(key, None)
        else:
            rule[key] = value
    return rule


def document_checks(*rules: dict[str, Any]) -> set[str]:
    return {problem.check for problem in lint_document({"groups": [{"name": "t", "rules": list(rules)}]})}


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


# --- counters -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        'servescope_serving_preemptions_total{job="servescope"} > 0',
        'sum by (instance) (servescope_gpu_xid_errors_total{job="servescope"}) > 0',
        'max_over_time(servescope_gpu_pcie_replay_errors_total{job="servescope"}[10m]) > 0',
        'servescope_serving_time_to_first_token_seconds_count{job="servescope"} > 100',
        'servescope_serving_time_to_first_token_seconds_bucket{job="servescope",le="0.5"} / 2 > 1',
        # the counter sits in the left operand, not in the rate() next to it
        "servescope_dcgm_pcie_replay_errors_total - rate(servescope_dcgm_pcie_replay_errors_total[5m]) > 0",
        '(servescope_serving_preemptions_total{job="servescope"}) > 0',
    ],
)
def test_counter_not_under_rate(expr: str) -> None:
    assert expr_checks(expr) == {"promql/counter"}


@pytest.mark.parametrize(
    "expr",
    [
        'rate(servescope_serving_preemptions_total{job="servescope"}[5m]) > 0.1',
        'sum by (instance) (increase(servescope_gpu_xid_errors_total{job="servescope"}[10m])) > 0',
        "irate(servescope_dcgm_pcie_replay_errors_total[1m] offset 5m) > 0",
        "resets(servescope_dcgm_dmon_restarts_total[1h]) > 0",
        "max_over_time(rate(servescope_serving_preemptions_total[5m])[1h:1m]) > 1",
        'absent(servescope_serving_preemptions_total{job="servescope"})',
    ],
)
def test_counter_under_rate_is_fine(expr: str) -> None:
    assert expr_checks(expr) == set()


def test_rate_over_a_gauge() -> None:
    assert expr_checks('rate(servescope_gpu_utilization_ratio{job="servescope"}[5m]) > 0') == {
        "promql/rate-gauge"
    }
    assert expr_checks('deriv(servescope_gpu_utilization_ratio{job="servescope"}[5m]) > 0') == set()


# --- histogram_quantile -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        f"histogram_quantile(0.99, rate({TTFT_BUCKET}[5m])) > 0.5",
        f"histogram_quantile(0.99, sum by (model_name) (rate({TTFT_BUCKET}[5m]))) > 0.5",
        f"histogram_quantile(0.99, sum without (le) (rate({TTFT_BUCKET}[5m]))) > 0.5",
        f"histogram_quantile(0.99, max by (le) (rate({TTFT_BUCKET}[5m]))) > 0.5",
        f"histogram_quantile(0.99, sum(rate({TTFT_BUCKET}[5m]))) > 0.5",
    ],
)
def test_histogram_quantile_without_sum_by_le(expr: str) -> None:
    assert expr_checks(expr) == {"promql/histogram-quantile"}


@pytest.mark.parametrize(
    "expr",
    [
        f"histogram_quantile(0.99, sum by (le, model_name) (rate({TTFT_BUCKET}[5m]))) > 0.5",
        f"histogram_quantile(0.99, sum(rate({TTFT_BUCKET}[5m])) by (model_name, le)) > 0.5",
        f"histogram_quantile(0.99, (sum without (instance, pod) (rate({TTFT_BUCKET}[5m])))) > 0.5",
    ],
)
def test_histogram_quantile_over_sum_by_le_is_fine(expr: str) -> None:
    assert expr_checks(expr) == set()


# --- metric names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        'servescope_nope{job="servescope"} > 0',
        'rate(servescope_nope_total{job="servescope"}[5m]) > 0',
        "servescope_gpu_utilisation_ratio > 0.9",  # a typo of servescope_gpu_utilization_ratio
        "instance:gpu_utilization:avg5m > 0.9",  # a recording rule nobody defines
        'servescope_gpu_up{job="servescope"} == 0 and on (instance) servescope_nope',
    ],
)
def test_unknown_metric(expr: str) -> None:
    assert expr_checks(expr) == {"promql/unknown-metric"}


@pytest.mark.parametrize(
    "expr",
    [
        "up == 0",
        'ALERTS{alertstate="firing"} > 0',
        "ALERTS_FOR_STATE > 0",
        "servescope_dcgm_sm_active_ratio > 0.9",  # a DCGM default counter
        "servescope_gpu_memory_growth_bytes_per_second > 0",  # a derived signal
        'vllm:num_requests_waiting{model_name="x"} > 5',  # vLLM alias names
        "vllm:gpu_cache_usage_perc > 0.9",
        "rate(vllm:num_preemptions_total[5m]) > 0",
        "histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 1",
        '{__name__="servescope_gpu_up"} == 0',
        "engine:servescope_kv_cache_usage:avg5m > 0.9",  # recorded by the bundle, below
    ],
)
def test_known_metrics(expr: str) -> None:
    record = Record(
        "engine:servescope_kv_cache_usage:avg5m", "avg_over_time(servescope_serving_kv_cache_usage_ratio[5m])"
    )
    assert checks(replace(GOOD, expr=expr), record) == set()


def test_metric_names_from_the_catalog_only_once_checked() -> None:
    problems = lint([Group("t", (replace(GOOD, expr="servescope_nope > 0"),))], CONFIG)
    assert [(p.rule, p.check) for p in problems] == [("ServescopeLintExample", "promql/unknown-metric")]
    assert "servescope_nope" in problems[0].message


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


# --- PromQL syntax (the parser itself: test_promql.py) ------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        "rate(x[5m]",
        "sum by (le (rate(x[5m]))",
        "x{job=servescope}",
        "x > > 1",
        "x ยง 1",
        "histogram_quantile(0.99)",
    ],
)
def test_syntax_error(expr: str) -> None:
    assert expr_checks(expr) == {"promql/syntax"}
