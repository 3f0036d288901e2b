"""deploy render --alerts-config: the runbook service reads the config the rules and dashboards were built
from, so its pages name the thresholds that fire; without it, the base has no such ConfigMap."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from servescope.core.config import load_config
from servescope.deploy.options import DeployOptions
from servescope.deploy.render import documents
from servescope.deploy.runbooks import ALERTS_CONFIG, ALERTS_CONFIG_DIR, ALERTS_CONFIG_KEY
from tests.deploy.manifests import container, find, pod_spec, rendered


def _options(tmp_path: Path) -> DeployOptions:
    path = tmp_path / "alerts.yaml"
    path.write_text("kv_pressure_ratio: 0.8\np99_threshold_seconds: 0.75\n")
    return DeployOptions(alerts_config=str(path))


def test_the_runbook_service_reads_the_config_from_a_configmap(tmp_path: Path) -> None:
    docs = tuple(documents(_options(tmp_path)))
    configmap = find(docs, "ConfigMap", ALERTS_CONFIG)
    shipped = tmp_path / "shipped.yaml"
    shipped.write_text(configmap["data"][ALERTS_CONFIG_KEY])
    assert load_config(shipped).kv_pressure_ratio == 0.8  # a file the service loads, with the thresholds
    workload = find(docs, "Deployment", "servescope-runbooks")
    args = container(workload)["args"]
    assert args[args.index("--alerts-config") + 1] == f"{ALERTS_CONFIG_DIR}/{ALERTS_CONFIG_KEY}"
    mounts = {m["name"]: m for m in container(workload)["volumeMounts"]}
    assert mounts["alerts-config"] == {
        "name": "alerts-config",
        "mountPath": ALERTS_CONFIG_DIR,
        "readOnly": True,
    }
    volumes = {v["name"]: v for v in pod_spec(workload)["volumes"]}
    assert volumes["alerts-config"]["configMap"]["name"] == ALERTS_CONFIG
    # A changed config rolls the pod: the service reads it at start.
    assert "servescope.io/alerts-config-sha256" in workload["spec"]["template"]["metadata"]["annotations"]


def test_the_dashboards_draw_the_same_config_the_rules_fire_on(tmp_path: Path) -> None:
    docs = tuple(documents(_options(tmp_path)))
    slo = json.loads(find(docs, "ConfigMap", "servescope-dashboard-serving-slo")["data"]["serving-slo.json"])
    steps = [s["value"] for p in slo["panels"] for s in p["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    assert 0.8 in steps and 0.75 in steps and 0.7 not in steps
    rules = yaml.safe_dump(find(docs, "PrometheusRule", "servescope"))
    assert "> 0.8" in rules


def test_without_a_config_the_base_has_none() -> None:
    docs = rendered()
    assert not [d for d in docs if d["metadata"]["name"] == ALERTS_CONFIG]
    assert "--alerts-config" not in container(find(docs, "Deployment", "servescope-runbooks"))["args"]
