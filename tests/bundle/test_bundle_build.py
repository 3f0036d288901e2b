"""`servescope bundle build`: one config file renders the rules, Alertmanager, dashboards and pages, and a
threshold set there is the one the rule fires on, the panel draws and the page names."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from servescope.cli import app, register_subcommands

CONFIG = "kv_pressure_ratio: 0.8\nslo_e2e_latency_le: '30.0'\nrunbook_base_url: https://runbooks.example\n"


def _build(*args: str) -> tuple[int, str]:
    register_subcommands("bundle")
    result = CliRunner().invoke(app, ["bundle", "build", *args], env={"COLUMNS": "200"})
    return result.exit_code, result.output


def _config(tmp_path: Path, text: str = CONFIG) -> Path:
    path = tmp_path / "alerts.yaml"
    path.write_text(text)
    return path


def _rule(rules: dict, name: str) -> dict:  # type: ignore[type-arg]
    return next(r for g in rules["groups"] for r in g["rules"] if r.get("alert") == name)


def test_one_config_reaches_the_rule_the_panel_and_the_page(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    code, output = _build("--config", str(_config(tmp_path)), "--out", str(out))
    assert code == 0, output
    rules = yaml.safe_load((out / "alerts/rules.yaml").read_text())
    assert "> 0.8" in _rule(rules, "ServescopeKvCachePressure")["expr"]
    assert _rule(rules, "ServescopeKvCachePressure")["annotations"]["runbook_url"].startswith(
        "https://runbooks.example/runbooks/ServescopeKvCachePressure"
    )
    slo = json.loads((out / "dashboards/serving-slo.json").read_text())
    kv = next(p for p in slo["panels"] if "KV cache usage" in p["title"])
    assert [s["value"] for s in kv["fieldConfig"]["defaults"]["thresholds"]["steps"]][1:] == [0.8]
    assert {"title": "Runbooks", "url": "https://runbooks.example/runbooks"}.items() <= next(
        link for link in slo["links"] if link["title"] == "Runbooks"
    ).items()
    page = (out / "runbooks/ServescopeKvCachePressure.md").read_text()
    assert "has stayed above 0.8 for" in page and "{{ config" not in page and "{{ labels.endpoint }}" in page
    e2e = (out / "runbooks/ServescopeE2eSloBurnFast.md").read_text()
    assert 'le="30.0"' in e2e and 'le="30.0"' in (out / "alerts/rules.yaml").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["alerts", "dashboards", "runbooks"]


def test_check_says_current_then_names_what_is_stale(tmp_path: Path) -> None:
    out, config = tmp_path / "bundle", _config(tmp_path)
    assert _build("--config", str(config), "--out", str(out))[0] == 0
    code, output = _build("--config", str(config), "--out", str(out), "--check")
    assert code == 0 and "are current" in output
    (out / "runbooks/ServescopeKvCachePressure.md").write_text("edited")
    (out / "dashboards/extra.json").write_text("{}")
    code, output = _build("--out", str(out), "--check")  # the defaults: every config-derived file differs
    assert (
        code == 1 and "runbooks/ServescopeKvCachePressure.md" in output and "dashboards/extra.json" in output
    )


def test_a_bad_config_writes_nothing_and_names_the_field(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    code, output = _build("--config", str(_config(tmp_path, "kv_pressure_ratio: 7\n")), "--out", str(out))
    assert code == 1 and "kv_pressure_ratio" in output and not out.exists()


def test_the_defaults_render_the_committed_builds(tmp_path: Path) -> None:
    """Without --config, the bundle's rules and dashboards are the committed builds, byte for byte."""
    from servescope.bundle.alerts import BUILD_DIR as ALERTS_BUILD
    from servescope.bundle.dashboards import BUILD_DIR as DASHBOARDS_BUILD

    out = tmp_path / "bundle"
    assert _build("--out", str(out))[0] == 0
    for built, part in ((ALERTS_BUILD, "alerts"), (DASHBOARDS_BUILD, "dashboards")):
        for path in built.iterdir():
            if path.is_file() and path.suffix in (".yaml", ".json"):
                assert (out / part / path.name).read_text() == path.read_text(), path.name
