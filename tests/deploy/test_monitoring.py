"""The objects Prometheus, Grafana and Alertmanager load: ServiceMonitors, PrometheusRule, dashboards,
and the Alertmanager snippet, checked field by field (kubernetes-validate has no schema for CRDs)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from servescope.bundle.alerts import BUILD_DIR as ALERTS_BUILD
from servescope.bundle.dashboards import BUILD_DIR as DASHBOARDS_BUILD
from servescope.core.config import AlertsConfig
from servescope.deploy.monitoring import alertmanager_receiver, receiver_rules
from servescope.deploy.options import DeployOptions
from servescope.deploy.render import RECEIVER, documents
from servescope.deploy.runbooks import ALERTMANAGER_TOKEN_FILE
from servescope.runbooks.webhook import WEBHOOK_PATH
from tests.deploy.manifests import DEPLOY, VARIANTS, find, matches, relabel, rendered


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("name", ["servescope", "servescope-runbooks"])
def test_service_monitor_selects_its_service_and_a_port_it_has(variant: str, name: str) -> None:
    options, docs = VARIANTS[variant], rendered(variant)
    monitor, service = find(docs, "ServiceMonitor", name), find(docs, "Service", name)
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    # kube-prometheus-stack's Prometheus selects it by `release`, unless servescope's agent scrapes it.
    assert monitor["metadata"]["labels"].get("release") == (None if options.agent else options.release)
    assert matches(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    assert service["metadata"]["namespace"] in monitor["spec"]["namespaceSelector"]["matchNames"]
    port_names = {p["name"] for p in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in port_names
        assert endpoint["interval"] == options.scrape_interval
        assert endpoint["path"].startswith("/")


def test_the_job_label_prometheus_gives_the_exporter_is_the_one_the_rules_select() -> None:
    # prometheus-operator names the job after the Service (no jobLabel set).
    monitor = find(rendered(), "ServiceMonitor", "servescope")
    assert "jobLabel" not in monitor["spec"]
    assert AlertsConfig().selector == f'job="{find(rendered(), "Service", "servescope")["metadata"]["name"]}"'


def test_exporter_targets_are_named_after_their_node_and_keep_the_workloads_pod_labels() -> None:
    (endpoint,) = find(rendered(), "ServiceMonitor", "servescope")["spec"]["endpoints"]
    # The target labels prometheus-operator gives an exporter pod behind a Service.
    target = {
        "__address__": "10.0.3.7:9108",
        "__meta_kubernetes_pod_node_name": "gpu-node-17",
        "instance": "10.0.3.7:9108",
        "job": "servescope",
        "namespace": "servescope",
        "service": "servescope",
        "endpoint": "metrics",
        "pod": "servescope-x7k2p",
        "container": "exporter",
    }
    kept = {k: v for k, v in relabel(target, endpoint["relabelings"]).items() if not k.startswith("__")}
    assert kept == {"instance": "gpu-node-17", "job": "servescope"}
    # So a series of the workloads keeps its own namespace/pod/container (no exported_* renaming).
    assert not {"namespace", "pod", "container", "endpoint"} & set(kept)


def test_the_runbook_service_reads_each_alerts_own_exporter() -> None:
    deployment = find(rendered(), "Deployment", "servescope-runbooks")
    assert "--exporter-per-instance" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_prometheus_rule_shape_labels_and_runbook_links(variant: str) -> None:
    options = VARIANTS[variant]
    if options.rule_file_for_ruler:  # the rules go to Mimir's or Thanos's ruler: nothing in the cluster
        assert not [d for d in rendered(variant) if d["kind"] == "PrometheusRule"]
        groups = receiver_rules(options)["groups"]
    else:
        rule = find(rendered(variant), "PrometheusRule", "servescope")
        assert rule["apiVersion"] == "monitoring.coreos.com/v1"
        assert rule["metadata"]["namespace"] == (options.rule_namespace or options.namespace)
        labels = rule["metadata"]["labels"]
        if (
            options.rules_for == "prometheusrule"
        ):  # the receiver's ruler's labels, not kube-prometheus-stack's
            assert options.rule_labels.items() <= labels.items() and "release" not in labels
        else:
            assert labels["release"] == options.release
        groups = rule["spec"]["groups"]
    assert groups and len({g["name"] for g in groups}) == len(groups)
    alerts = 0
    for group in groups:
        assert set(group) <= {"name", "interval", "rules"} and group["rules"]
        for item in group["rules"]:
            assert ("alert" in item) != ("record" in item), item
            assert isinstance(item["expr"], str) and item["expr"].strip()
            if "alert" in item:
                alerts += 1
                assert item["labels"]["severity"] in {"critical", "warning", "info"}
                assert item["annotations"]["runbook_url"].startswith(
                    f"{options.runbook_base_url()}/runbooks/{item['alert']}"
                ), item["alert"]
                assert item["annotations"]["summary"]
    assert alerts >= 10


def test_prometheus_rule_is_the_alert_bundle_s_own() -> None:
    # Rendered for the bundle's default namespace, the rule is the bundle's committed build, byte for byte
    # once parsed; other namespaces change only where it lives and the URLs that name it.
    committed = yaml.safe_load((ALERTS_BUILD / "prometheusrule.yaml").read_text())
    at_defaults = DeployOptions(namespace=AlertsConfig().namespace, create_namespace=False)
    assert find(documents(at_defaults), "PrometheusRule") == committed


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_accepts_the_rules_rendered_for_another_namespace(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(find(rendered("elsewhere"), "PrometheusRule")["spec"]))
    result = subprocess.run(
        ["promtool", "check", "rules", str(rules)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("variant", ["default", "elsewhere"])
def test_one_dashboard_configmap_per_built_dashboard_for_the_grafana_sidecar(variant: str) -> None:
    built = {p.stem: p for p in sorted(DASHBOARDS_BUILD.glob("*.json"))}
    maps = [d for d in rendered(variant) if d["kind"] == "ConfigMap"]
    assert sorted(m["metadata"]["name"] for m in maps) == sorted(f"servescope-dashboard-{n}" for n in built)
    for configmap in maps:
        assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert configmap["metadata"]["namespace"] == VARIANTS[variant].namespace
        ((key, text),) = configmap["data"].items()
        dashboard, expected = json.loads(text), json.loads(built[key.removesuffix(".json")].read_text())
        # The one difference a deployment makes: the link to the runbooks goes where they are served.
        (link,) = [link for link in dashboard["links"] if link["title"] == "Runbooks"]
        assert link["url"] == f"{VARIANTS[variant].runbook_base_url()}/runbooks"
        (expected_link,) = [link for link in expected["links"] if link["title"] == "Runbooks"]
        expected_link["url"] = link["url"]
        assert dashboard == expected


def test_alertmanager_snippet_posts_to_the_runbook_service_with_the_mounted_token() -> None:
    options = DeployOptions()
    snippet = alertmanager_receiver(options)
    assert set(snippet) == {"route", "receivers", "inhibit_rules"}
    (webhook,) = next(r for r in snippet["receivers"] if r["name"] == "servescope-runbooks")[
        "webhook_configs"
    ]
    url = urlsplit(webhook["url"])
    service = find(rendered(), "Service", "servescope-runbooks")
    assert url.hostname == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    assert url.port == service["spec"]["ports"][0]["port"]
    assert url.path == WEBHOOK_PATH
    assert webhook["http_config"]["authorization"]["credentials_file"] == ALERTMANAGER_TOKEN_FILE
    assert webhook["send_resolved"] is True


def test_every_route_names_a_receiver_of_the_snippet() -> None:
    snippet = alertmanager_receiver(DeployOptions())
    names = {r["name"] for r in snippet["receivers"]}
    routes = [snippet["route"], *snippet["route"]["routes"]]
    assert {r["receiver"] for r in routes} <= names
    # The runbook service sees every alert first, and the alert goes on to people's receivers after it.
    first = snippet["route"]["routes"][0]
    assert first["receiver"] == "servescope-runbooks" and first["continue"] is True


def test_committed_snippet_parses_to_the_rendered_one_and_says_where_the_secret_goes() -> None:
    text = (DEPLOY / RECEIVER).read_text()
    assert yaml.safe_load(text) == alertmanager_receiver(DeployOptions())
    assert "alertmanagerSpec.secrets" in text


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("amtool") is None, reason="amtool is not installed")
def test_amtool_accepts_the_snippet_as_a_configuration() -> None:
    result = subprocess.run(
        ["amtool", "check-config", str(DEPLOY / RECEIVER)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
