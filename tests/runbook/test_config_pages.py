"""The runbook service shows the thresholds of its --alerts-config, the ones the rules were built from."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from servescope.core.config import AlertsConfig
from servescope.runbooks.actions import RunContext
from servescope.runbooks.actions.serving import _warnings
from servescope.runbooks.audit import AuditLog
from servescope.runbooks.document import SHIPPED_RUNBOOKS, parse_runbook
from servescope.runbooks.model import RunbookError
from servescope.runbooks.server import create_runbook_app
from tests.runbook.cli_peers import invoke

CONFIG = "kv_pressure_ratio: 0.8\nslo_e2e_latency_le: '30.0'\n"
CFG = AlertsConfig.model_validate({"kv_pressure_ratio": 0.8, "slo_e2e_latency_le": "30.0"})


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "alerts.yaml"
    path.write_text(CONFIG)
    return path


def test_runbook_show_reads_the_thresholds_of_the_config(config_file: Path) -> None:
    shown = invoke("show", "ServescopeKvCachePressure", "--alerts-config", str(config_file))
    assert shown.exit_code == 0, shown.output
    assert "has stayed above 0.8 for" in shown.output and "than 80% of the blocks" in shown.output
    default = invoke("show", "ServescopeKvCachePressure")
    assert "has stayed above 0.7 for" in default.output and "{{ config" not in default.output


def test_a_config_that_does_not_load_is_refused_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kv_pressure_ratio: 7\n")
    shown = invoke("list", "--alerts-config", str(bad))
    assert shown.exit_code == 2 and "kv_pressure_ratio" in shown.output, shown.output


def test_the_e2e_page_queries_the_configured_end_to_end_bound() -> None:
    runbook = parse_runbook(SHIPPED_RUNBOOKS / "ServescopeE2eSloBurnSlow.md", config=CFG)
    queries = [str(step.params.get("query", "")) for step in runbook.steps]
    assert any('le="30.0"' in query for query in queries)
    assert not any('le="0.5"' in query for query in queries)
    assert "under 30 s" in runbook.sections["Meaning"]


def test_the_served_page_shows_the_configured_threshold(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl", echo=io.StringIO())
    app = create_runbook_app(SHIPPED_RUNBOOKS, RunContext(), tokens=None, audit=audit, config=CFG)
    page = TestClient(app).get("/runbooks/ServescopeKvCachePressure")
    assert page.status_code == 200 and "than 80% of the blocks" in page.text and "{{ config" not in page.text


def test_a_page_naming_no_config_value_is_an_error_with_its_line(tmp_path: Path) -> None:
    text = (SHIPPED_RUNBOOKS / "ServescopeKvCachePressure.md").read_text()
    broken = text.replace("{{ config.kv_pressure_ratio }}", "{{ config.kv_pressure }}", 1)
    line = broken.splitlines().index(next(ln for ln in broken.splitlines() if "kv_pressure }}" in ln)) + 1
    with pytest.raises(RunbookError) as caught:
        parse_runbook(tmp_path / "ServescopeKvCachePressure.md", broken)
    assert caught.value.line == line and "kv_pressure" in caught.value.message


def test_the_snapshot_warns_at_the_configured_kv_bound() -> None:
    report = {
        "kv_cache_usage_ratio": 0.75,
        "requests_running": 4,
        "requests_waiting": 0,
        "memory_over_budget_bytes": {},
    }
    assert any("KV cache over 70.0%" in line for line in _warnings(report, AlertsConfig()))
    assert not _warnings(report, CFG)  # 75% is under the configured 80%
