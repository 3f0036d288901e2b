"""Shared helpers: rendered documents, lookups by kind and name, and the option sets worth checking."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from servescope.deploy.options import DeployOptions
from servescope.deploy.render import documents
from servescope.deploy.runbooks import RunbookTokens

ROOT = Path(__file__).parent.parent.parent
DEPLOY = ROOT / "deploy"
BASE = DEPLOY / "base"

Doc = dict[str, Any]

# Each variant turns on what the defaults leave off, so every branch of the renderer is checked.
VARIANTS: dict[str, DeployOptions] = {
    "default": DeployOptions(),
    "podmonitor": DeployOptions(topology="podmonitor", vllm_namespaces=["llm", "llm-canary"], dcgm="off"),
    "unprivileged": DeployOptions(
        topology="podmonitor",
        pod_resources=False,
        create_namespace=False,
        runtime_class="",
        priority_class="",
        dcgm="dcgmi",
    ),
    "host-network": DeployOptions(
        host_network=True, dcgm="exporter-url", dcgm_exporter_url="http://$(NODE_IP):9400/metrics"
    ),
    "agent": DeployOptions(
        agent=True,
        agent_shards=4,
        topology="podmonitor",
        process_memory=True,
        extra_scraper_namespace="alloy",
        extra_scraper_pod_labels={"app.kubernetes.io/name": "alloy"},
    ),
    "capacity": DeployOptions(
        capacity_url="http://vllm.staging.svc:8000",
        capacity_target="staging-a",
        capacity_slo=["ttft:0.5", "e2e:20"],
        capacity_args="--start-qps 8 --prompt-tokens 512 --output-tokens 128",
    ),
    # A GPU Operator cluster as its operators change it: own taints and affinity, k0s's kubelet root, an
    # AppArmor profile of their own.
    "gpu-operator": DeployOptions(
        tolerations=["nvidia.com/gpu:NoSchedule", "dedicated=inference:NoExecute", "*"],
        node_affinity=["nvidia.com/gpu.product In NVIDIA-H200,NVIDIA-B200", "example.com/pool NotIn cpu"],
        gpu_deploy_label="nvidia.com/gpu.deploy.dcgm-exporter",
        kubelet_root="/var/lib/k0s/kubelet",
        apparmor_profile="localhost/servescope-exporter",
    ),
    # An agent writing to Mimir: the rules for Mimir's ruler, the runbook service on Mimir's query API.
    "agent-mimir": DeployOptions(
        agent=True,
        agent_shards=3,
        remote_write_url="https://mimir.example.com/api/v1/push",
        rules_for="mimir",
        prometheus_url="https://mimir.example.com/prometheus",
    ),
    # An agent writing to Thanos Receive, the rules for a ThanosRuler selecting them by label.
    "agent-ruler": DeployOptions(
        agent=True,
        remote_write_url="http://thanos-receive.thanos.svc:19291/api/v1/receive",
        rules_for="prometheusrule",
        rule_labels={"thanos-ruler": "servescope"},
        rule_namespace="thanos",
        prometheus_url="http://thanos-query.thanos.svc:9090",
    ),
    "elsewhere": DeployOptions(
        namespace="observability",
        release="prom",
        alertmanager_namespace="alerting",
        prometheus_namespace="metrics",
        people_namespace="ingress-nginx",
        incidents_pvc="servescope-incidents",
        runbook_url="https://runbooks.example.com",
        node_selector={"node-role.example.com/gpu": ""},
    ),
}
TOKENS = RunbookTokens(webhook="w" * 64, change="c" * 64)


@cache
def rendered(variant: str = "default", with_tokens: bool = False) -> tuple[Doc, ...]:
    return tuple(documents(VARIANTS[variant], TOKENS if with_tokens else None))


def find(
    docs: tuple[Doc, ...] | list[Doc], kind: str, name: str | None = None, namespace: str | None = None
) -> Doc:
    matches = [
        d
        for d in docs
        if d["kind"] == kind
        and (name is None or d["metadata"]["name"] == name)
        and (namespace is None or d["metadata"].get("namespace") == namespace)
    ]
    assert len(matches) == 1, f"expected one {kind} {name or ''}, found {len(matches)}"
    return matches[0]


def pod_spec(workload: Doc) -> Doc:
    spec: Doc = workload["spec"]["template"]["spec"]
    return spec


def container(workload: Doc) -> Doc:
    containers = pod_spec(workload)["containers"]
    assert len(containers) == 1
    first: Doc = containers[0]
    return first


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def relabel(labels: dict[str, str], rules: list[Doc]) -> dict[str, str]:
    """Prometheus's target relabelling for the actions the monitors use (replace, labeldrop)."""
    result = dict(labels)
    for rule in rules:
        action = rule.get("action", "replace").lower()
        regex = re.compile(rule.get("regex", "(.*)"))
        if action == "labeldrop":
            result = {k: v for k, v in result.items() if not regex.fullmatch(k)}
            continue
        assert action == "replace", rule
        value = rule.get("separator", ";").join(result.get(name, "") for name in rule.get("sourceLabels", []))
        found = regex.fullmatch(value)
        if found is not None:
            result[rule["targetLabel"]] = found.expand(rule.get("replacement", "$1").replace("$", "\\"))
    return result
