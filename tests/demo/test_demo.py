"""`servescope demo`: its state directory, the configuration it generates, its options, and running
without Prometheus and Alertmanager. The full stack is tested end to end in tests/e2e/test_demo_stack.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from servescope.bundle.alerts.bundle import all_alerts
from servescope.bundle.alerts.lint import lint_rule_file
from servescope.bundle.alerts.profiles import DEMO, with_profile
from servescope.core.config import AlertsConfig
from servescope.runbooks.webhook import WEBHOOK_PATH
from servescope_sim.demo import stack as stack_module
from servescope_sim.demo.configs import Ports, demo_alerts, write_configs
from servescope_sim.demo.stack import DemoOptions, DemoStack
from servescope_sim.demo.state_dir import MARKER, StateDirError, prepare_state_dir

PORTS = Ports(exporter=19108, runbooks=19110, prometheus=19090, alertmanager=19093)


def test_state_dir_is_made_then_emptied_but_a_foreign_folder_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    prepare_state_dir(state)
    (state / "old-data").write_text("from the last demo")
    prepare_state_dir(state)
    assert sorted(p.name for p in state.iterdir()) == [MARKER]
    foreign = tmp_path / "home"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(StateDirError, match="not made by `servescope demo`"):
        prepare_state_dir(foreign)
    assert (foreign / "notes.txt").read_text() == "mine"


def test_generated_configs_wire_prometheus_alertmanager_and_the_webhook(tmp_path: Path) -> None:
    files = write_configs(tmp_path, PORTS)
    prometheus = yaml.safe_load(files.prometheus.read_text())
    assert prometheus["global"]["scrape_interval"] == "5s"
    assert prometheus["rule_files"] == [str(files.rules)]
    targets = {c["job_name"]: c["static_configs"][0]["targets"] for c in prometheus["scrape_configs"]}
    assert targets["servescope"] == ["127.0.0.1:19108"]
    alerting = prometheus["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert alerting == ["127.0.0.1:19093"]

    alertmanager = yaml.safe_load(files.alertmanager.read_text())
    webhook = next(r for r in alertmanager["receivers"] if r.get("webhook_configs"))["webhook_configs"][0]
    assert webhook["url"] == f"http://127.0.0.1:19110{WEBHOOK_PATH}"
    assert webhook["http_config"]["authorization"]["credentials_file"] == str(files.webhook_token)
    token = files.webhook_token.read_text().strip()
    assert len(token) == 64 and files.webhook_token.stat().st_mode & 0o077 == 0
    assert files.change_token.read_text().strip() != token


def _paths_in(node: object, key: str = "") -> list[tuple[str, str]]:
    """Every (key, value) of a config whose program reads the value as a file path."""
    if isinstance(node, dict):
        return [found for k, v in node.items() for found in _paths_in(v, str(k))]
    if isinstance(node, list):
        return [found for item in node for found in _paths_in(item, key)]
    if isinstance(node, str) and (key.endswith(("_file", "_files")) or key in ("templates", "directory")):
        return [(key, node)]
    return []


def test_every_path_in_the_generated_configs_is_absolute_from_a_relative_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Prometheus and Alertmanager resolve these against the config file's folder, not the demo's cwd.
    monkeypatch.chdir(tmp_path)
    files = write_configs(Path(".servescope-demo"), PORTS)
    found = [
        *_paths_in(yaml.safe_load(files.prometheus.read_text())),
        *_paths_in(yaml.safe_load(files.alertmanager.read_text())),
    ]
    assert {key for key, _ in found} == {"rule_files", "credentials_file"}
    for key, value in found:
        assert Path(value).is_absolute() and Path(value).is_file(), f"{key}: {value}"
    assert files.rules == tmp_path.resolve() / ".servescope-demo" / "rules.yaml"


def test_demo_rules_are_the_bundle_at_the_demo_profile_and_lint_clean(tmp_path: Path) -> None:
    files = write_configs(tmp_path, PORTS)
    cfg = demo_alerts(PORTS, files.webhook_token)
    assert cfg == with_profile(cfg, "demo")  # the demo profile is applied
    assert lint_rule_file(files.rules, cfg) == []
    rules = {
        rule["alert"]: rule
        for group in yaml.safe_load(files.rules.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    assert set(rules) == {alert.name for alert in all_alerts(cfg)}
    assert rules["ServescopeGpuSaturatedKvPressure"]["for"] == DEMO["combined_for"]
    assert rules["ServescopeGpuLost"]["for"] == DEMO["gpu_lost_for"]
    assert rules["ServescopeGpuLost"]["annotations"]["runbook_url"].startswith(
        "http://127.0.0.1:19110/runbooks/ServescopeGpuLost"
    )


def test_the_demo_profile_judges_canaries_sooner_and_keeps_the_rest_of_the_section(tmp_path: Path) -> None:
    mine = AlertsConfig.model_validate({"canary": {"latency_ratio": 1.3, "window": "30m"}})
    demo = with_profile(mine, "demo")
    assert (demo.canary.window, demo.canary.min_requests, demo.canary.worse_for) == ("2m", 200, "1m")
    assert demo.canary.latency_ratio == 1.3  # a field the profile leaves alone is the config's
    files = write_configs(tmp_path, Ports(19108, 19110, 19090, 19093))
    assert AlertsConfig.model_validate(yaml.safe_load(files.alerts.read_text())).canary.window == "2m"


def test_unknown_profile_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown profile 'fast'; known: default, demo"):
        with_profile(AlertsConfig(), "fast")


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scenario", "meltdown"], "--scenario 'meltdown': choose one of steady, kv-pressure"),
        (["--gpus", "2", "--engines", "4"], "--engines 4: more engines than --gpus 2"),
        (
            ["--scenario", "canary", "--engines", "1"],
            "--engines 1: the canary scenario needs a stable engine",
        ),
    ],
)
def test_bad_options_exit_2_naming_the_option(tmp_path: Path, args: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "servescope", "demo", *args, f"--state-dir={tmp_path / 's'}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert not (tmp_path / "s").exists()  # refused before anything started


@pytest.mark.e2e
def test_without_prometheus_it_says_how_to_install_and_runs_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stack_module, "find_binaries", lambda: (None, None))
    lines: list[str] = []
    demo = DemoStack(
        DemoOptions(scenario="steady", gpus=2, engines=1, state_dir=tmp_path / "state"), echo=lines.append
    )
    try:
        demo.start()
        assert any("apt-get install prometheus prometheus-alertmanager" in line for line in lines)
        assert set(demo.urls) == {"exporter", "runbooks"}
        assert httpx.get(demo.urls["exporter"] + "/readyz", timeout=5).status_code == 200
        assert httpx.get(demo.urls["runbooks"] + "/runbooks", timeout=5).status_code == 200
        described = demo.describe()
        assert demo.urls["exporter"] + "/metrics" in described and "Prometheus" not in described
        urls = json.loads((tmp_path / "state" / "urls.json").read_text())
        assert urls["full"] is False and urls["exporter"] == demo.urls["exporter"]
    finally:
        demo.stop()
    assert all(not child.running() for child in demo.children)
