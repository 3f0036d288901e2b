"""The offline rule linter's PromQL checks: counters under rate(), histogram_quantile over buckets summed
by le, known metric names, syntax."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servescope.bundle.alerts.lint import lint
from servescope.bundle.alerts.model import Group, Record
from tests.alerts.linting import CONFIG, GOOD, checks, expr_checks

TTFT_BUCKET = 'servescope_serving_time_to_first_token_seconds_bucket{job="servescope"}'


# --- counters -----------------------------------------------------------------------------------------


COUNTER_OUTSIDE_RATE = [
    'servescope_serving_preemptions_total{job="servescope"} > 0',
    'sum by (instance) (servescope_gpu_xid_errors_total{job="servescope"}) > 0',
    'max_over_time(servescope_gpu_pcie_replay_errors_total{job="servescope"}[10m]) > 0',
    'servescope_serving_time_to_first_token_seconds_count{job="servescope"} > 100',
    'servescope_serving_time_to_first_token_seconds_bucket{job="servescope",le="0.5"} / 2 > 1',
    # the counter sits in the left operand, not in the rate() next to it
    "servescope_dcgm_pcie_replay_errors_total - rate(servescope_dcgm_pcie_replay_errors_total[5m]) > 0",
    '(servescope_serving_preemptions_total{job="servescope"}) > 0',
]


COUNTER_UNDER_RATE = [
    'rate(servescope_serving_preemptions_total{job="servescope"}[5m]) > 0.1',
    'sum by (instance) (increase(servescope_gpu_xid_errors_total{job="servescope"}[10m])) > 0',
    "irate(servescope_dcgm_pcie_replay_errors_total[1m] offset 5m) > 0",
    "resets(servescope_dcgm_dmon_restarts_total[1h]) > 0",
    "max_over_time(rate(servescope_serving_preemptions_total[5m])[1h:1m]) > 1",
    'absent(servescope_serving_preemptions_total{job="servescope"})',
]


def test_rate_over_a_gauge() -> None:
    assert expr_checks('rate(servescope_gpu_utilization_ratio{job="servescope"}[5m]) > 0') == {
        "promql/rate-gauge"
    }
    assert expr_checks('deriv(servescope_gpu_utilization_ratio{job="servescope"}[5m]) > 0') == set()


# --- histogram_quantile -------------------------------------------------------------------------------


QUANTILE_NOT_SUMMED_BY_LE = [
    f"histogram_quantile(0.99, rate({TTFT_BUCKET}[5m])) > 0.5",
    f"histogram_quantile(0.99, sum by (model_name) (rate({TTFT_BUCKET}[5m]))) > 0.5",
    f"histogram_quantile(0.99, sum without (le) (rate({TTFT_BUCKET}[5m]))) > 0.5",
    f"histogram_quantile(0.99, max by (le) (rate({TTFT_BUCKET}[5m]))) > 0.5",
    f"histogram_quantile(0.99, sum(rate({TTFT_BUCKET}[5m]))) > 0.5",
]


QUANTILE_SUMMED_BY_LE = [
    f"histogram_quantile(0.99, sum by (le, model_name) (rate({TTFT_BUCKET}[5m]))) > 0.5",
    f"histogram_quantile(0.99, sum(rate({TTFT_BUCKET}[5m])) by (model_name, le)) > 0.5",
    f"histogram_quantile(0.99, (sum without (instance, pod) (rate({TTFT_BUCKET}[5m])))) > 0.5",
]


# --- metric names -------------------------------------------------------------------------------------


UNKNOWN_METRIC = [
    'servescope_nope{job="servescope"} > 0',
    'rate(servescope_nope_total{job="servescope"}[5m]) > 0',
    "servescope_gpu_utilisation_ratio > 0.9",  # a typo of servescope_gpu_utilization_ratio
    "instance:gpu_utilization:avg5m > 0.9",  # a recording rule nobody defines
    'servescope_gpu_up{job="servescope"} == 0 and on (instance) servescope_nope',
]


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


# --- PromQL syntax (the parser itself: test_promql.py) ------------------------------------------------------


SYNTAX_ERROR = [
    "rate(x[5m]",
    "sum by (le (rate(x[5m]))",
    "x{job=servescope}",
    "x > > 1",
    "x ยง 1",
    "histogram_quantile(0.99)",
]


# Each list above, and the checks every expression of it fails (none: the linter passes it).
FOUND = [
    (COUNTER_OUTSIDE_RATE, {"promql/counter"}),
    (COUNTER_UNDER_RATE, set()),
    (QUANTILE_NOT_SUMMED_BY_LE, {"promql/histogram-quantile"}),
    (QUANTILE_SUMMED_BY_LE, set()),
    (UNKNOWN_METRIC, {"promql/unknown-metric"}),
    (SYNTAX_ERROR, {"promql/syntax"}),
]


@pytest.mark.parametrize(("expr", "found"), [(expr, found) for exprs, found in FOUND for expr in exprs])
def test_checks_an_expression_fails(expr: str, found: set[str]) -> None:
    assert expr_checks(expr) == found
