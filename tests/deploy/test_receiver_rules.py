"""With --agent writing elsewhere, the rules go where the series are and nothing goes to the in-cluster
Prometheus (which would only fire absent() alerts); the runbook service asks the receiver."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from servescope.bundle.alerts.bundle import rule_file
from servescope.deploy.monitoring import alerts_config
from servescope.deploy.options import DeployOptions
from servescope.deploy.render import write_base
from tests.deploy.manifests import VARIANTS, container, find, rendered
from tests.deploy.test_cli import render

MIMIR = ["--agent", "--remote-write-url", "https://mimir.example.com/api/v1/push"]


def test_an_agent_writing_elsewhere_must_say_where_the_rules_and_queries_go() -> None:
    missing_rules = render(*MIMIR, "--prometheus-url", "https://mimir.example.com/prometheus")
    assert missing_rules.exit_code == 2 and "--rules-for" in missing_rules.stderr
    assert "absent()" in missing_rules.stderr
    missing_query = render(*MIMIR, "--rules-for", "mimir")
    assert missing_query.exit_code == 2 and "--prometheus-url" in missing_query.stderr
    unlabelled = render(*MIMIR, "--rules-for", "prometheusrule", "--prometheus-url", "http://q:9090")
    assert unlabelled.exit_code == 2 and "--rule-label" in unlabelled.stderr
    # Writing to kube-prometheus-stack's own Prometheus, the in-cluster rules are the receiver's.
    assert render("--agent").exit_code == 0


def test_rules_for_mimir_are_a_file_beside_the_base_and_nothing_in_cluster(tmp_path: Path) -> None:
    options = VARIANTS["agent-mimir"]
    written = write_base(tmp_path / "base", tmp_path / "alertmanager-receiver.yaml", options)
    rules = yaml.safe_load((tmp_path / "receiver-rules.yaml").read_text())
    assert tmp_path / "receiver-rules.yaml" in written
    assert rules == {"namespace": options.namespace, **rule_file(alerts_config(options))}
    names = {rule.get("alert") for group in rules["groups"] for rule in group["rules"]}
    assert {"ServescopeAgentShardSilent", "ServescopeGpuMetricsAbsent", "ServescopeWatchdog"} <= names
    assert not list((tmp_path / "base").glob("prometheusrule-*.yaml"))
    runbooks = container(find(rendered("agent-mimir"), "Deployment", "servescope-runbooks"))
    assert (
        runbooks["args"][runbooks["args"].index("--prometheus-url") + 1]
        == "https://mimir.example.com/prometheus"
    )
    agent = find(rendered("agent-mimir"), "PrometheusAgent")
    assert agent["spec"]["remoteWrite"] == [{"url": "https://mimir.example.com/api/v1/push"}]
    assert agent["spec"]["shards"] == 3


def test_the_runbook_service_may_reach_the_receiver_s_query_api() -> None:
    policy = find(rendered("agent-mimir"), "NetworkPolicy", "servescope-runbooks")
    assert {"ports": [{"protocol": "TCP", "port": 443}]} in policy["spec"]["egress"]


def test_rules_for_a_ruler_selecting_by_label_carry_its_labels_not_the_release() -> None:
    rule = find(rendered("agent-ruler"), "PrometheusRule")
    assert rule["metadata"]["namespace"] == "thanos"
    assert (
        rule["metadata"]["labels"]["thanos-ruler"] == "servescope"
        and "release" not in rule["metadata"]["labels"]
    )


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (make tools)")
def test_rules_for_thanos_are_a_rule_file_promtool_loads(tmp_path: Path) -> None:
    thresholds = tmp_path / "alerts.yaml"
    thresholds.write_text("agent_silent_for: 7m\ngpu_lost_for: 30s\n")
    result = render(
        *MIMIR, "--rules-for", "thanos", "--prometheus-url", "http://thanos-query:9090",
        "--alerts-config", str(thresholds), "--receiver-rules",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    path = tmp_path / "rules.yaml"
    path.write_text(result.stdout)
    checked = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    alerts = {
        r["alert"]: r for g in yaml.safe_load(result.stdout)["groups"] for r in g["rules"] if "alert" in r
    }
    assert alerts["ServescopeAgentShardSilent"]["for"] == "7m" and alerts["ServescopeGpuLost"]["for"] == "30s"
    assert "namespace" not in yaml.safe_load(result.stdout)


def test_a_bad_alerts_config_is_refused_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "alerts.yaml"
    bad.write_text("gpu_lost_for: soon\n")
    result = render("--alerts-config", str(bad))
    assert result.exit_code == 2 and "--alerts-config" in result.stderr and "gpu_lost_for" in result.stderr
    assert DeployOptions().alerts_config == ""
