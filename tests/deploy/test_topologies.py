"""The two topologies (exporter scrapes the engines / a PodMonitor does) and the agent option, read as
prometheus-operator reads them: which monitors a Prometheus or PrometheusAgent selects, with what labels."""

from __future__ import annotations

import re

import pytest

from servescope.deploy.names import AGENT
from servescope.deploy.scraping import vllm_pod_monitor
from tests.deploy.manifests import VARIANTS, Doc, find, matches, relabel, rendered


def _kinds(variant: str, kind: str) -> list[Doc]:
    return [d for d in rendered(variant) if d["kind"] == kind]


def test_the_exporter_topology_renders_no_pod_monitor() -> None:
    assert _kinds("default", "PodMonitor") == []


def test_the_pod_monitor_selects_the_engines_by_their_label_port_and_namespaces() -> None:
    options = VARIANTS["podmonitor"]
    monitor = find(rendered("podmonitor"), "PodMonitor", "servescope-vllm")
    assert monitor["metadata"]["labels"]["release"] == options.release
    assert monitor["spec"]["selector"] == {"matchLabels": {"app.kubernetes.io/name": "vllm"}}
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["llm", "llm-canary"]}
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "http" and endpoint["path"] == "/metrics"
    any_namespace = find(rendered("agent"), "PodMonitor")["spec"]["namespaceSelector"]
    assert any_namespace == {"any": True}


def test_engine_targets_keep_their_pod_labels_gain_the_node_instance_job_and_url() -> None:
    (endpoint,) = find(rendered("podmonitor"), "PodMonitor")["spec"]["podMetricsEndpoints"]
    target = {
        "__address__": "10.0.9.4:8000",
        "__meta_kubernetes_pod_node_name": "gpu-node-17",
        "instance": "10.0.9.4:8000",
        "job": "llm/servescope-vllm",
        "namespace": "llm",
        "pod": "deepseek-v3-0",
        "container": "vllm",
        "endpoint": "http",
    }
    kept = {k: v for k, v in relabel(target, endpoint["relabelings"]).items() if not k.startswith("__")}
    assert kept == {
        "instance": "gpu-node-17",
        "job": "vllm",
        "namespace": "llm",
        "pod": "deepseek-v3-0",
        "container": "vllm",
        # The engine's URL, as the exporter topology labels it, not the operator's port name.
        "endpoint": "http://10.0.9.4:8000/metrics",
    }


def test_without_the_agent_nothing_but_the_central_prometheus_scrapes() -> None:
    for kind in ("PrometheusAgent", "ClusterRole", "ClusterRoleBinding"):
        assert [d for d in _kinds("default", kind) if d["metadata"]["name"] == AGENT] == []
    assert _kinds("default", "PrometheusAgent") == []


def test_the_agent_selects_every_servescope_monitor_and_the_central_prometheus_none() -> None:
    options, docs = VARIANTS["agent"], rendered("agent")
    agent = find(docs, "PrometheusAgent", AGENT)
    spec = agent["spec"]
    monitors = [d for d in docs if d["kind"] in ("ServiceMonitor", "PodMonitor")]
    assert len(monitors) == 3  # the exporters, the runbook service, the engines
    for monitor in monitors:
        selector = spec[f"{monitor['kind'][0].lower()}{monitor['kind'][1:]}Selector"]
        assert matches(selector["matchLabels"], monitor["metadata"]["labels"]), monitor["metadata"]["name"]
        namespace_selector = spec[f"{monitor['kind'][0].lower()}{monitor['kind'][1:]}NamespaceSelector"]
        assert namespace_selector["matchLabels"] == {"kubernetes.io/metadata.name": options.namespace}
        assert "release" not in monitor["metadata"]["labels"]
    assert spec["shards"] == 4 and spec["replicas"] == 1
    assert spec["scrapeInterval"] == options.scrape_interval
    # The rules still go to the central Prometheus (or a ruler), which kube-prometheus-stack selects.
    assert find(docs, "PrometheusRule")["metadata"]["labels"]["release"] == options.release


def test_the_agent_writes_to_kube_prometheus_stack_s_receiver_unless_told_otherwise() -> None:
    (write,) = find(rendered("agent"), "PrometheusAgent")["spec"]["remoteWrite"]
    assert write == {"url": "http://kube-prometheus-stack-prometheus.monitoring.svc:9090/api/v1/write"}
    options = VARIANTS["agent"].model_copy(update={"remote_write_url": "http://mimir.example/api/v1/push"})
    assert options.remote_write_target() == "http://mimir.example/api/v1/push"


def test_the_agent_may_read_what_service_and_pod_discovery_need_and_nothing_more() -> None:
    docs = rendered("agent")
    agent = find(docs, "PrometheusAgent")
    account = find(docs, "ServiceAccount", agent["spec"]["serviceAccountName"])
    binding = find(docs, "ClusterRoleBinding", AGENT)
    role = find(docs, "ClusterRole", binding["roleRef"]["name"])
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": account["metadata"]["name"],
            "namespace": agent["metadata"]["namespace"],
        }
    ]
    verbs = {verb for rule in role["rules"] for verb in rule["verbs"]}
    assert verbs == {"get", "list", "watch"}
    resources = {resource for rule in role["rules"] for resource in rule["resources"]}
    assert resources == {"services", "endpoints", "pods", "endpointslices"}
    assert "namespace" not in role["metadata"] and "namespace" not in binding["metadata"]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_s_monitors_scrape_the_node_name_as_instance(variant: str) -> None:
    for monitor in (d for d in rendered(variant) if d["kind"] in ("ServiceMonitor", "PodMonitor")):
        if monitor["metadata"]["name"] == "servescope-runbooks":
            continue  # one pod, not per node
        endpoints = monitor["spec"].get("endpoints") or monitor["spec"]["podMetricsEndpoints"]
        for endpoint in endpoints:
            labels = relabel(
                {"__meta_kubernetes_pod_node_name": "n1", "instance": "ip:port"}, endpoint["relabelings"]
            )
            assert labels["instance"] == "n1"


def test_the_podmonitor_topology_s_rules_join_the_engines_own_series_on_the_pod() -> None:
    (rule,) = _kinds("podmonitor", "PrometheusRule")
    expressions = [r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]]
    assert any('vllm:kv_cache_usage_perc{job="vllm"}' in e for e in expressions)
    assert any("on (namespace, pod) group_right" in e for e in expressions)
    (default,) = _kinds("default", "PrometheusRule")
    assert not any(
        "servescope_gpu_pod_info" in r["expr"] for g in default["spec"]["groups"] for r in g["rules"]
    )


def test_the_pod_monitor_drops_only_series_no_rule_of_its_topology_reads() -> None:
    (endpoint,) = find(rendered("podmonitor"), "PodMonitor")["spec"]["podMetricsEndpoints"]
    (drop,) = endpoint["metricRelabelings"]
    assert drop["sourceLabels"] == ["__name__"] and drop["action"] == "drop"
    pattern = re.compile(drop["regex"])
    (rule,) = _kinds("podmonitor", "PrometheusRule")
    read = {
        name
        for group in rule["spec"]["groups"]
        for r in group["rules"]
        for name in re.findall(r"vllm:[a-z_:]+", r["expr"])
    }
    assert "vllm:time_to_first_token_seconds_bucket" in read
    assert not {name for name in read if pattern.fullmatch(name)}
    for dropped in ("vllm:request_success_created", "vllm:request_params_n_bucket"):
        assert pattern.fullmatch(dropped), dropped


def test_an_empty_drop_expression_keeps_every_engine_series() -> None:
    options = VARIANTS["podmonitor"].model_copy(update={"vllm_drop_series": ""})
    (endpoint,) = vllm_pod_monitor(options)["spec"]["podMetricsEndpoints"]
    assert "metricRelabelings" not in endpoint
    with pytest.raises(ValueError, match="not a regular expression"):
        VARIANTS["podmonitor"].model_validate({"vllm_drop_series": "vllm:("})
