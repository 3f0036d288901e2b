"""The PodMonitor puts the engine pod's rollout revision on its series: the first configured pod label
the pod carries, judged by a real Prometheus applying the rendered relabelings to discovered pods.

Prometheus' Kubernetes discovery offers pod labels as `__meta_kubernetes_pod_label_<name>` meta labels;
a file_sd target declaring the same meta labels goes through the same relabeling, and the targets API
shows the labels each target ends with (no scrape needed).
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from servescope.core.catalog.revision import DEFAULT_REVISION_POD_LABELS
from servescope.core.processes import Child, free_port
from servescope.deploy.options import DeployOptions
from servescope.deploy.revision import meta_label
from servescope.deploy.scraping import vllm_pod_monitor

# The operator's camelCase relabeling fields and the Prometheus configuration's names.
SNAKE = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
# pod name -> its labels: Argo Rollouts (both hashes set), a Deployment, a chart's version only, none.
PODS = {
    "rollout-pod": {"rollouts-pod-template-hash": "6d4cf56db9", "pod-template-hash": "abc", "app": "vllm"},
    "deployment-pod": {"pod-template-hash": "7f8b9c0d1e", "app.kubernetes.io/version": "0.8.1"},
    "versioned-pod": {"app.kubernetes.io/version": "0.8.1"},
    "bare-pod": {"app": "vllm"},
}
EXPECTED = {"rollout-pod": "6d4cf56db9", "deployment-pod": "7f8b9c0d1e", "versioned-pod": "0.8.1"}


def relabel_configs(options: DeployOptions) -> list[dict[str, Any]]:
    endpoint = vllm_pod_monitor(options)["spec"]["podMetricsEndpoints"][0]
    return [{SNAKE.get(key, key): value for key, value in rule.items()} for rule in endpoint["relabelings"]]


def discovered(port: int) -> list[dict[str, str]]:
    """The pods as Kubernetes discovery would offer them: their labels as meta labels."""
    targets = []
    for i, (pod, labels) in enumerate(PODS.items()):
        meta = {meta_label(key): value for key, value in labels.items()}
        meta |= {"__meta_kubernetes_pod_name": pod, "__meta_kubernetes_pod_node_name": "node-a"}
        targets.append({"targets": [f"127.0.0.1:{port + i}"], "labels": meta})
    return targets


def final_labels(prometheus: int, deadline_s: float = 60.0) -> dict[str, dict[str, str]]:
    """pod -> the labels its target ends with, from the targets API once every pod is there."""
    stop = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{prometheus}/api/v1/targets", timeout=5) as answer:
                active = json.load(answer)["data"]["activeTargets"]
        except OSError:
            active = []
        found = {t["discoveredLabels"]["__meta_kubernetes_pod_name"]: t["labels"] for t in active}
        if len(found) == len(PODS) or time.monotonic() > stop:
            return found
        time.sleep(0.5)


@pytest.mark.e2e
def test_the_first_revision_label_a_pod_carries_is_its_series_revision(tmp_path: Path) -> None:
    options = DeployOptions(topology="podmonitor")
    port = free_port()
    (tmp_path / "pods.json").write_text(json.dumps(discovered(free_port())))
    config = {
        "scrape_configs": [
            {
                "job_name": "pods",
                "scrape_interval": "1h",
                "file_sd_configs": [{"files": [str(tmp_path / "pods.json")]}],
                "relabel_configs": relabel_configs(options),
            }
        ]
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    argv = [
        "prometheus",
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    child = Child("prometheus", argv, tmp_path / "prometheus.log")
    child.start()
    try:
        child.wait_ready(f"http://127.0.0.1:{port}/-/ready", 60.0)
        labels = final_labels(port)
    finally:
        child.stop()
    assert {pod: found.get("revision") for pod, found in labels.items()} == {**EXPECTED, "bare-pod": None}
    assert {found["job"] for found in labels.values()} == {"vllm"}


def test_the_revision_labels_are_configurable_and_checked() -> None:
    assert DeployOptions().revision_pod_labels == list(DEFAULT_REVISION_POD_LABELS)
    chosen = DeployOptions(topology="podmonitor", revision_pod_labels=["example.com/release"])
    assert relabel_configs(chosen)[-1]["source_labels"] == ["__meta_kubernetes_pod_label_example_com_release"]
    with pytest.raises(ValueError, match="not a Kubernetes label key"):
        DeployOptions(revision_pod_labels=["bad key"])
