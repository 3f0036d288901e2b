"""`{{ config.x }}` placeholders: filled from the config, strict about names and formats; `labels` kept."""

from __future__ import annotations

import pytest

from servescope.core.config import AlertsConfig
from servescope.core.config_text import ConfigTextError, placeholders, render_config

CFG = AlertsConfig.model_validate(
    {"kv_pressure_ratio": 0.8, "slo_objective": 0.995, "canary": {"min_requests": 900}}
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{ config.kv_pressure_ratio }}", "0.8"),
        ("{{config.kv_pressure_ratio|percent}}", "80%"),
        ("{{ config.error_budget | percent }}", "0.5%"),  # a derived value, float noise dropped
        ("{{ config.error_budget }}", "0.005"),
        ("{{ config.slo_e2e_latency_le }}", "60.0"),  # a bound keeps its dot: le="60.0"
        ("{{ config.slo_e2e_latency_le | number }} s", "60 s"),
        ("{{ config.over_budget_bytes | gib }} GiB", "1 GiB"),
        ("{{ config.capacity_buffer_ratio | complement }}", "0.8"),
        ("{{ config.capacity_buffer_ratio | complement_percent }}", "80%"),
        ("{{ config.canary.min_requests }} requests", "900 requests"),
        ("{{ config.drain_xids }}", "63, 92"),
        ("{{ config.kv_pressure_for | words }}", "5 minutes"),
        ("{{ config.planned_change_lag | words }}", "1 minute"),
        ("{{ config.xid_keep_firing_for | words }}", "1 day"),
    ],
)
def test_a_placeholder_becomes_the_config_value(text: str, expected: str) -> None:
    assert render_config(text, CFG) == expected


def test_label_placeholders_and_other_text_are_left_as_they_are() -> None:
    text = 'gpu: "{{ labels.gpu }}"\nover {{ config.kv_pressure_ratio | percent }} for 5m, {a: b}\n'
    assert render_config(text, CFG) == 'gpu: "{{ labels.gpu }}"\nover 80% for 5m, {a: b}\n'
    assert placeholders(text) == ["kv_pressure_ratio"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("ok\n{{ config.kv_presure_ratio }}", "has no value 'kv_presure_ratio'"),
        ("ok\n{{ config.canary }}", "has no value 'canary'"),  # a section is not a value
        ("ok\n{{ config.model_config }}", "has no value 'model_config'"),
        ("ok\n{{ config.kv_pressure_ratio | percnt }}", "unknown format 'percnt'"),
        ("ok\n{{ config.selector | percent }}", "is not a number"),
        ("ok\n{{ config.kv_pressure_ratio + 1 }}", "not a whole"),
        ("ok\n{{ config }}", "not a whole"),
    ],
)
def test_a_bad_placeholder_is_an_error_naming_its_line(text: str, says: str) -> None:
    with pytest.raises(ConfigTextError) as caught:
        render_config(text, CFG)
    assert caught.value.line == 2 and says in str(caught.value)
    assert caught.value.reason == "config_placeholder_invalid"
