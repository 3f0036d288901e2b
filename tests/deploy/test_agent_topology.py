"""The agent topology for real: Prometheus in agent mode scrapes the exporter and remote-writes into a
second Prometheus (remote-write receiver on), which evaluates the alert bundle as `deploy render --agent
--rules-for thanos` renders it for a receiver, and fires its alerts, the agent's own silence included.

The exporter runs with the DaemonSet's settings (`deploy render` defaults; the simulated dcgmi stands in
for the GPU Operator's dcgm-exporter) on a simulated node whose GPU 2 falls off the bus 20 s in (scenario
`gpu-lost` at the real pace). The agent's scrape job carries the target labels prometheus-operator gives
an exporter pod and the rendered ServiceMonitor's relabelings, so what reaches the receiver is what a
cluster would store, and the external labels the operator gives a PrometheusAgent's shard. The rules are
the receiver's rule file from `deploy render`, with an --alerts-config of short windows (a 5 s `for` on
the lost GPU, a shard silent after 10 s). Everything is on loopback, ports chosen free; each process is
stopped also when a check fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

from servescope.deploy.dcgm import exporter_env
from servescope.deploy.exporter import exporter_settings
from servescope.deploy.options import DeployOptions
from servescope.deploy.scraping import service_monitor
from tests.support import Child, free_port, wait_for

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is not installed (make tools)"),
]

SERVESCOPE = str(Path(sys.executable).with_name("servescope"))
NODE = "gpu-node-a"
LOST_GPU = "2"  # scenario gpu-lost: GPU 2 reports XID 79 and falls off the bus
# What prometheus-operator gives a PrometheusAgent's shard as external labels: the agent, and the pod.
SHARD_LABELS = {
    "prometheus": "servescope/servescope-agent",
    "prometheus_replica": "prom-agent-servescope-agent-0",
}
THRESHOLDS = {"gpu_lost_for": "5s", "agent_silence_window": "10s", "agent_silent_for": "5s"}
# What prometheus-operator puts on an exporter target before the ServiceMonitor's relabelings.
OPERATOR_TARGET_LABELS = {
    "__meta_kubernetes_pod_node_name": NODE,
    "namespace": "servescope",
    "service": "servescope",
    "endpoint": "metrics",
    "pod": "servescope-x7k2p",
    "container": "exporter",
}


@dataclass
class Topology:
    exporter: Child
    agent: Child
    receiver: Child
    receiver_url: str
    agent_url: str
    started: float
    timings: dict[str, float] = field(default_factory=dict)


def _relabel_config(rule: dict[str, Any]) -> dict[str, Any]:
    """A ServiceMonitor relabeling as Prometheus's relabel_config (what the operator generates)."""
    names = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    return {names.get(key, key): value for key, value in rule.items()}


def agent_config(exporter_port: int, receiver_port: int) -> dict[str, Any]:
    (endpoint,) = service_monitor(DeployOptions())["spec"]["endpoints"]
    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "external_labels": SHARD_LABELS},
        "scrape_configs": [
            {
                "job_name": "servescope",  # the operator names the job after the Service
                "metrics_path": endpoint["path"],
                "static_configs": [
                    {"targets": [f"127.0.0.1:{exporter_port}"], "labels": OPERATOR_TARGET_LABELS}
                ],
                "relabel_configs": [_relabel_config(rule) for rule in endpoint["relabelings"]],
            }
        ],
        "remote_write": [
            {
                "url": f"http://127.0.0.1:{receiver_port}/api/v1/write",
                "queue_config": {"batch_send_deadline": "1s", "max_shards": 1},
            }
        ],
    }


def receiver_config(rules: Path) -> dict[str, Any]:
    return {"global": {"evaluation_interval": "1s"}, "rule_files": [str(rules)]}


def receiver_rules(state: Path, receiver_port: int) -> Path:
    """The rules `deploy render` renders for this receiver (a Thanos-style rule file), short windows."""
    thresholds = _write(state / "alerts.yaml", THRESHOLDS)
    receiver = f"http://127.0.0.1:{receiver_port}"
    argv = [SERVESCOPE, "deploy", "render", "--agent", "--remote-write-url", f"{receiver}/api/v1/write"]
    argv += ["--rules-for", "thanos", "--prometheus-url", receiver, "--alerts-config", str(thresholds)]
    rendered = subprocess.run(
        [*argv, "--receiver-rules"], capture_output=True, text=True, timeout=60, check=True
    )
    path = state / "rules.yaml"
    path.write_text(rendered.stdout)
    return path


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _exporter(state: Path) -> tuple[Child, int]:
    port = free_port()
    settings = exporter_settings(DeployOptions())
    for item in exporter_env(DeployOptions()):
        settings.pop(item["name"], None)  # no dcgm-exporter here: the simulated dcgmi serves DCGM
    argv = [SERVESCOPE, "serve", "--simulate", "--gpus", "4", "--engines", "2", "--scenario", "gpu-lost"]
    argv += ["--listen", f"127.0.0.1:{port}", "--hostname", NODE]
    return Child("exporter", argv, state / "exporter.log", env={**os.environ, **settings}), port


def _prometheus(name: str, state: Path, config: Path, port: int, flags: list[str]) -> Child:
    argv = ["prometheus", f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}", *flags]
    return Child(name, argv, state / f"{name}.log")


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    state = tmp_path_factory.mktemp("agent-topology")
    exporter, exporter_port = _exporter(state)
    receiver_port, agent_port = free_port(), free_port()
    rules = receiver_rules(state, receiver_port)
    receiver = _prometheus(
        "receiver",
        state,
        _write(state / "receiver.yml", receiver_config(rules)),
        receiver_port,
        [f"--storage.tsdb.path={state / 'receiver-data'}", "--web.enable-remote-write-receiver"],
    )
    agent = _prometheus(
        "agent",
        state,
        _write(state / "agent.yml", agent_config(exporter_port, receiver_port)),
        agent_port,
        ["--enable-feature=agent", f"--storage.agent.path={state / 'agent-data'}"],
    )
    children = [exporter, receiver, agent]
    try:
        started = time.monotonic()
        for child in children:  # all three start together; the fault's 20 s run meanwhile
            child.start()
        exporter.wait_ready(f"http://127.0.0.1:{exporter_port}/readyz", timeout=60)
        for child, port in ((receiver, receiver_port), (agent, agent_port)):
            child.wait_ready(f"http://127.0.0.1:{port}/-/ready", timeout=60)
        yield Topology(
            exporter,
            agent,
            receiver,
            f"http://127.0.0.1:{receiver_port}",
            f"http://127.0.0.1:{agent_port}",
            started,
        )
    finally:
        for child in reversed(children):
            child.stop()


def query(base: str, expr: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{base}/api/v1/query", params={"query": expr}, timeout=5)
    response.raise_for_status()
    result: list[dict[str, Any]] = response.json()["data"]["result"]
    return result


def firing(base: str, alertname: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{base}/api/v1/alerts", timeout=5)
    response.raise_for_status()
    alerts = response.json()["data"]["alerts"]
    return [a for a in alerts if a["labels"]["alertname"] == alertname and a["state"] == "firing"]


def test_the_agent_forwards_the_exporter_s_series_named_after_the_node(topology: Topology) -> None:
    series = wait_for(
        "the exporter's GPUs on the receiver",
        lambda: query(topology.receiver_url, 'servescope_gpu_up{job="servescope"}') or None,
        timeout=30,
        every=0.5,
    )
    topology.timings["first_series_on_receiver"] = time.monotonic() - topology.started
    assert sorted(s["metric"]["gpu"] for s in series) == ["0", "1", "2", "3"]
    for item in series:
        labels = item["metric"]
        assert labels["instance"] == NODE, labels  # the relabeling: instance is the node, not ip:port
        assert labels["hostname"] == NODE
        assert not {"namespace", "pod", "container", "service", "endpoint"} & set(labels), labels
    # `up` is the agent's own (its scrape's report, sent in a later batch than the samples).
    up = wait_for("up on the receiver", lambda: query(topology.receiver_url, 'up{job="servescope"}'), 10, 0.5)
    assert [(s["metric"]["instance"], s["value"][1]) for s in up] == [(NODE, "1")]
    # The agent keeps no queryable storage: the receiver is where the series are.
    assert (
        httpx.get(f"{topology.agent_url}/api/v1/query", params={"query": "up"}, timeout=5).status_code != 200
    )


def test_the_receiver_evaluates_the_bundle_and_fires_the_lost_gpu(topology: Topology) -> None:
    watchdog = wait_for(
        "ServescopeWatchdog",
        lambda: firing(topology.receiver_url, "ServescopeWatchdog"),
        timeout=30,
        every=0.5,
    )
    assert watchdog[0]["labels"]["severity"] == "info"
    lost = wait_for(
        "ServescopeGpuLost", lambda: firing(topology.receiver_url, "ServescopeGpuLost"), timeout=90, every=0.5
    )
    topology.timings["gpu_lost_firing"] = time.monotonic() - topology.started
    (alert,) = lost
    assert alert["labels"]["gpu"] == LOST_GPU
    # A lost GPU is a ticket: a cause, which the model's pages explain.
    assert alert["labels"]["instance"] == NODE and alert["labels"]["severity"] == "warning"
    assert urlsplit(alert["annotations"]["runbook_url"]).path == "/runbooks/ServescopeGpuLost"
    # Only the lost GPU: the three others are still answering.
    assert len(query(topology.receiver_url, 'servescope_gpu_up{job="servescope"} == 1')) == 3
    print(f"agent topology timings (s after start): {topology.timings}")


def test_the_receiver_fires_nothing_for_absent_series(topology: Topology) -> None:
    # In-cluster, these fired forever where the agent wrote elsewhere; here the series are present.
    for name in ("ServescopeGpuMetricsAbsent", "ServescopeServingMetricsAbsent"):
        assert firing(topology.receiver_url, name) == []


def test_a_silent_agent_fires_on_the_receiver_naming_the_shard(topology: Topology) -> None:
    # Runs last: the agent stops here, as a shard's pod OOM-killed or evicted would; once the receiver
    # holds what the shard sent (this test may run first on a worker of its own).
    shard = f'up{{job="servescope",prometheus_replica="{SHARD_LABELS["prometheus_replica"]}"}}'
    wait_for("the shard's series on the receiver", lambda: query(topology.receiver_url, shard), 30, 0.5)
    assert firing(topology.receiver_url, "ServescopeAgentShardSilent") == []
    stopped = time.monotonic()
    topology.agent.stop()
    silent = wait_for(
        "ServescopeAgentShardSilent",
        lambda: firing(topology.receiver_url, "ServescopeAgentShardSilent"),
        timeout=90,
        every=0.5,
    )
    (alert,) = silent
    assert alert["labels"]["prometheus_replica"] == SHARD_LABELS["prometheus_replica"]
    assert alert["labels"]["severity"] == "warning"
    assert urlsplit(alert["annotations"]["runbook_url"]).path == "/runbooks/ServescopeAgentShardSilent"
    assert alert["annotations"]["description"].startswith(
        f"Agent {SHARD_LABELS['prometheus_replica']} has sent nothing for 10s, and 1 node(s) it scraped"
    )
    print(f"ServescopeAgentShardSilent firing {time.monotonic() - stopped:.1f} s after the agent stopped")
