"""The committed build is current, promtool accepts it, and `servescope alerts build` behaves."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
import yaml

from servescope.bundle.alerts.bundle import FILES, all_alerts, groups, stale
from servescope.core.config import AlertsConfig
from tests.alerts.promtool import BUILD, ROOT, RULES

SERVESCOPE = str(Path(sys.executable).with_name("servescope"))


def test_committed_build_is_current() -> None:
    assert stale(BUILD, AlertsConfig()) == [], "alerts/build is stale: run `servescope alerts build`"


@pytest.mark.e2e
def test_promtool_check_rules_lint_fatal() -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: `make test` installs it (scripts/install-debian-tools.sh)"
    result = subprocess.run(
        [promtool, "check", "rules", "--lint-fatal", str(RULES)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rules = sum(len(g.rules) for g in groups(AlertsConfig()))
    assert f"SUCCESS: {rules} rules found" in result.stdout


def test_prometheusrule_carries_the_same_groups_and_the_release_label() -> None:
    crd = yaml.safe_load((BUILD / "prometheusrule.yaml").read_text())
    plain = yaml.safe_load(RULES.read_text())
    assert crd["kind"] == "PrometheusRule"
    assert crd["apiVersion"] == "monitoring.coreos.com/v1"
    assert crd["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert crd["spec"] == plain


def test_every_alert_links_its_runbook_and_names_are_unique() -> None:
    alerts = all_alerts(AlertsConfig())
    names = [a.name for a in alerts]
    assert len(names) == len(set(names))
    rendered = yaml.safe_load(RULES.read_text())
    for group in rendered["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                url = rule["annotations"]["runbook_url"]
                assert url.startswith(
                    f"http://servescope-runbooks.monitoring.svc:9110/runbooks/{rule['alert']}"
                )


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SERVESCOPE, "alerts", *args], capture_output=True, text=True, check=False)


@pytest.mark.e2e
def test_cli_build_with_overrides(tmp_path: Path) -> None:
    config = tmp_path / "alerts.yaml"
    config.write_text(
        "gpu_saturated_ratio: 0.9\nselector: 'job=\"gpu-exporter\"'\nrelease_label: prom\n"
        "runbook_base_url: https://runbooks.example.com\n"
    )
    out = tmp_path / "build"
    result = _run("build", "--out", str(out), "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    text = (out / "rules.yaml").read_text()
    exprs = {
        r["alert"]: r["expr"] for g in yaml.safe_load(text)["groups"] for r in g["rules"] if "alert" in r
    }
    assert (
        'avg_over_time(servescope_gpu_utilization_ratio{job="gpu-exporter"}[10m]) > 0.9'
        in exprs["ServescopeGpuSaturated"]
    )
    assert "https://runbooks.example.com/runbooks/ServescopeGpuSaturated?" in text
    assert (
        yaml.safe_load((out / "prometheusrule.yaml").read_text())["metadata"]["labels"]["release"] == "prom"
    )
    # --check: current now, stale once a file is edited.
    assert _run("build", "--out", str(out), "--config", str(config), "--check").returncode == 0
    (out / "rules.yaml").write_text(text.replace("0.9", "0.95"))
    checked = _run("build", "--out", str(out), "--config", str(config), "--check")
    assert checked.returncode == 1
    assert "rules.yaml" in checked.stderr


@pytest.mark.e2e
def test_cli_bad_config_is_named(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("gpu_saturated_ratio: 85\n")
    result = _run("build", "--out", str(tmp_path / "o"), "--config", str(config))
    assert result.returncode == 1
    assert "bad.yaml" in result.stderr and "gpu_saturated_ratio" in result.stderr
    config.write_text("kv_pressure_for: soon\n")
    result = _run("build", "--out", str(tmp_path / "o"), "--config", str(config))
    assert result.returncode == 1
    assert "kv_pressure_for" in result.stderr and "duration" in result.stderr
    config.write_text("no_such_threshold: 1\n")
    assert "no_such_threshold" in _run("build", "--config", str(config), "--out", str(tmp_path / "o")).stderr
    config.write_text("- a list\n")
    assert "expected a mapping" in _run("build", "--config", str(config), "--out", str(tmp_path / "o")).stderr


@pytest.mark.e2e
def test_cli_refuses_to_build_rules_that_do_not_lint(tmp_path: Path) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text("selector: 'job=~'\n")
    out = tmp_path / "o"
    result = _run("build", "--out", str(out), "--config", str(config))
    assert result.returncode == 1
    assert "[promql/syntax]" in result.stderr
    assert not out.exists()


@pytest.mark.e2e
def test_cli_lint_command(tmp_path: Path) -> None:
    assert _run("lint", str(RULES), str(BUILD / "prometheusrule.yaml")).returncode == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "groups:\n- name: g\n  rules:\n  - alert: ServescopeBad\n"
        "    expr: servescope_serving_preemptions_total > 0\n    for: 5m\n    labels: {severity: warning}\n"
    )
    result = _run("lint", str(bad))
    assert result.returncode == 1
    assert "[promql/counter]" in result.stdout
    assert "[alerts/runbook-url]" in result.stdout
    missing = _run("lint", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 1 and "nope.yaml" in missing.stderr


def test_dashboard_links_pass_only_variables_the_dashboard_defines() -> None:
    """Read from the built dashboards themselves: a `var-` the dashboard lacks is ignored by Grafana."""
    boards = {}
    for path in (ROOT / "servescope" / "bundle" / "dashboards" / "build").glob("*.json"):
        data = json.loads(path.read_text())
        boards[data["uid"]] = {v["name"] for v in data["templating"]["list"]}
    rendered = yaml.safe_load(RULES.read_text())
    checked = 0
    for group in rendered["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            url = urlsplit(rule["annotations"]["dashboard_url"])
            uid = url.path.rsplit("/", 1)[-1]
            assert uid in boards, (rule["alert"], uid)
            passed = {key.removeprefix("var-") for key, _ in parse_qsl(url.query)}
            assert passed <= boards[uid], (rule["alert"], passed - boards[uid])
            checked += 1
    assert checked == len(all_alerts(AlertsConfig()))


@pytest.mark.parametrize(
    ("prefix", "uid"),
    [
        ("ServescopeGpuMemory", "servescope-gpu-memory"),
        ("ServescopeEngineOverMemoryBudget", "servescope-gpu-memory"),
        ("ServescopeNvlink", "servescope-interconnect"),
        ("ServescopePcie", "servescope-interconnect"),
    ],
)
def test_memory_and_interconnect_alerts_link_their_dashboards(prefix: str, uid: str) -> None:
    alerts = [a for a in all_alerts(AlertsConfig()) if a.name.startswith(prefix)]
    assert alerts
    for alert in alerts:
        assert f"/d/{uid}" in alert.dashboard_url(AlertsConfig()), alert.name


def test_every_gpu_alert_carries_hostname() -> None:
    """An alert about a GPU (its labels include uuid) names the node, for the pager and for silences."""
    gpu_alerts = [a for a in all_alerts(AlertsConfig()) if "uuid" in a.keys]
    assert len(gpu_alerts) > 10
    for alert in gpu_alerts:
        assert "hostname" in alert.keys, alert.name
