"""Live: real Prometheus and Alertmanager with the built bundle (PodMonitor topology, the demo profile's
shorter `for`s) and the receiver snippet merged into kube-prometheus-stack's default configuration; simulated
vLLM engines as pods. A rolling update of 8 replicas, a scale-down from 3 to 2 and a pod moved to another
node send no notification; an engine that crash-loops (its pod stays, its container restarts) is one page.

What the receivers get is counted at their webhooks: the pager's page, the tickets, the runbook service's
incidents. The clock is compressed by the alert profile, not faked: the test runs about five minutes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from servescope.bundle.alerts.bundle import rule_file
from servescope.bundle.alerts.profiles import with_profile
from servescope.core.config import AlertsConfig
from tests.alerts.alertmanager import merged, tool
from tests.alerts.live import Cluster, Pod
from tests.support import Child, free_port, servescope_serving, wait_for

SCRAPE = "5s"
PLANNED = ("deepseek", "qwen", "llama")
RECEIVERS = {
    "pager": "/pager",
    "ticket": "/ticket",
    "heartbeat": "/heartbeat",
    "servescope-runbooks": "/runbooks",
}


def _rules(folder: Path) -> Path:
    cfg = with_profile(
        AlertsConfig(engine_topology="podmonitor", engine_selector='job="vllm"'),
        "demo",
        kube_state_metrics=True,
    )
    path = folder / "rules.yaml"
    path.write_text(yaml.safe_dump(rule_file(cfg), sort_keys=False, width=200))
    return path


def _alertmanager_config(folder: Path, cluster: Cluster) -> Path:
    config = merged()
    token = folder / "token"
    token.write_text("live-test\n")
    for receiver in config["receivers"]:
        if receiver["name"] in RECEIVERS:
            hook: dict[str, Any] = {"url": cluster.url + RECEIVERS[receiver["name"]], "send_resolved": True}
            if receiver["name"] == "servescope-runbooks":
                hook["http_config"] = {"authorization": {"type": "Bearer", "credentials_file": str(token)}}
            receiver["webhook_configs"] = [hook]
    path = folder / "alertmanager.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _prometheus_config(folder: Path, cluster: Cluster, exporter: str, alertmanager: str) -> Path:
    node_a = {"instance": "node-a"}  # the ServiceMonitor relabels instance to the node's name
    config = {
        "global": {"scrape_interval": SCRAPE, "evaluation_interval": SCRAPE},
        "rule_files": [str(_rules(folder))],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
        "scrape_configs": [
            {"job_name": "servescope", "static_configs": [{"targets": [exporter], "labels": node_a}]},
            {
                "job_name": "kube-state-metrics",
                "static_configs": [{"targets": [cluster.url.removeprefix("http://")]}],
            },
            {
                "job_name": "vllm",
                "file_sd_configs": [{"files": [str(cluster.sd_file)], "refresh_interval": SCRAPE}],
            },
        ],
    }
    path = folder / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _start(name: str, argv: list[str], folder: Path, ready: str) -> Child:
    child = Child(name, argv, folder / f"{name}.log")
    child.start()
    child.wait_ready(ready, 60)
    return child


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[Cluster, str]]:
    cluster = Cluster(tmp_path)
    children: list[Child] = []
    try:
        with servescope_serving(
            "--simulate", "--gpus", "2", "--engines", "0", "--scenario", "steady", timeout=60
        ) as exporter:
            am_port, prom_port = free_port(), free_port()
            am_argv = [
                tool("prometheus-alertmanager"),
                f"--config.file={_alertmanager_config(tmp_path, cluster)}",
                f"--storage.path={tmp_path / 'am'}",
                f"--web.listen-address=127.0.0.1:{am_port}",
                "--cluster.listen-address=",
            ]
            children.append(_start("alertmanager", am_argv, tmp_path, f"http://127.0.0.1:{am_port}/-/ready"))
            config = _prometheus_config(
                tmp_path, cluster, exporter.base.removeprefix("http://"), f"127.0.0.1:{am_port}"
            )
            prom_argv = [
                tool("prometheus"),
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ]
            children.append(
                _start("prometheus", prom_argv, tmp_path, f"http://127.0.0.1:{prom_port}/-/ready")
            )
            yield cluster, f"http://127.0.0.1:{prom_port}"
    finally:
        for child in reversed(children):
            child.stop()
        cluster.close()


def _crash_loop(pod: Pod, stopping: threading.Event) -> None:
    """The container crashes, is down 40 s (back-off, model loading), answers 10 s, crashes again."""
    while not stopping.is_set():
        pod.control(down=True)
        if stopping.wait(40):
            break
        pod.control(down=False)
        stopping.wait(10)


def _rolling_update(cluster: Cluster) -> None:
    """deepseek's 8 replicas replaced 2 at a time: the new pods load 10 s, then 2 old ones are deleted
    (terminating 5 s, then gone)."""
    for batch in range(4):
        new = [cluster.create(Pod(f"ds-new-{2 * batch + i}", "deepseek", "node-a")) for i in range(2)]
        time.sleep(10)
        for pod in new:
            pod.start()
        old = [f"ds-old-{2 * batch + i}" for i in range(2)]
        for name in old:
            cluster.delete(name)
        time.sleep(5)
        for name in old:
            cluster.forget(name)
        time.sleep(10)


def _firing(prometheus: str, seconds: int) -> list[dict[str, str]]:
    expr = f'max_over_time(ALERTS{{alertstate="firing", alertname!="ServescopeWatchdog"}}[{seconds}s])'
    answer = httpx.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10).json()
    return [series["metric"] for series in answer["data"]["result"]]


@pytest.mark.e2e
@pytest.mark.slow
def test_planned_changes_send_nothing_and_a_crash_loop_one_page(stack: tuple[Cluster, str]) -> None:
    # One live cluster's story read top to bottom (the fleet, its changes, what each receiver got): longer
    # than 40 lines on purpose.
    cluster, prometheus = stack
    started = time.monotonic()
    pods = [
        *(Pod(f"ds-old-{i}", "deepseek", "node-a") for i in range(8)),
        *(Pod(f"qwen-{i}", "qwen", "node-a") for i in range(3)),
        Pod("llama-0", "llama", "node-a"),
        Pod("llama-1", "llama", "node-a"),
        Pod("crashy-0", "crashy", "node-a"),
        Pod("crashy-1", "crashy", "node-a"),
    ]
    for pod in pods:
        cluster.create(pod).start()
    # Every engine answered Prometheus: each pod is known to serve its model.
    wait_for("every engine scraped", lambda: len(_up(prometheus)) == len(pods), 90, every=2)
    stopping = threading.Event()
    looping = threading.Thread(target=_crash_loop, args=(cluster.pods["crashy-1"], stopping), daemon=True)
    looping.start()
    try:
        _rolling_update(cluster)  # about 2 minutes
        cluster.delete("qwen-2")  # scaled down from 3 to 2
        moved = cluster.create(Pod("llama-2", "llama", "node-b"))  # llama-1 moves to node-b
        cluster.delete("llama-1")
        time.sleep(5)
        cluster.forget("qwen-2")
        cluster.forget("llama-1")
        time.sleep(10)
        moved.start()
        # Long enough for an endpoint "down" or a page to fire about the planned changes (the demo profile's
        # `for`s are 30 s to 1 min, their windows 2 min), and for the crash loop's page to come.
        time.sleep(150)
        pages = wait_for(
            "the crash loop's page", lambda: _firing_notifications(cluster, "/pager"), 120, every=5
        )
        time.sleep(30)  # a second page would come here
    finally:
        stopping.set()
        looping.join(60)
    seconds = int(time.monotonic() - started) + 10
    fired = _firing(prometheus, seconds)
    # No alert about the models that only changed, no page but the crash loop's.
    planned = [a for a in fired if a.get("model_name") in PLANNED]
    other_pages = [a for a in fired if a.get("severity") == "critical" and a.get("model_name") != "crashy"]
    assert (planned, other_pages) == ([], [])
    pages = _firing_notifications(cluster, "/pager")
    assert len(pages) == 1, pages
    assert [(a["labels"]["alertname"], a["labels"]["model_name"]) for a in pages[0]["alerts"]] == [
        ("ServescopeAvailabilitySloBurnFast", "crashy")
    ]
    tickets = [a for n in _firing_notifications(cluster, "/ticket") for a in n["alerts"]]
    assert [a["labels"] for a in tickets if a["labels"].get("model_name") != "crashy"] == []
    incidents = {a["labels"]["alertname"] for n in cluster.notifications("/runbooks") for a in n["alerts"]}
    crash = {
        "ServescopeAvailabilitySloBurnFast",
        "ServescopeServingEndpointDown",
        "ServescopeEngineRestartLoop",
    }
    assert incidents - {"ServescopeWatchdog", *crash} == set()
    print(
        f"live pages: {len(pages)} page ({pages[0]['alerts'][0]['labels']['alertname']}), "
        f"{len(tickets)} ticket alerts (crashy's), runbook incidents {sorted(incidents)}, {seconds} s"
    )


def _up(prometheus: str) -> list[dict[str, Any]]:
    answer = httpx.get(
        f"{prometheus}/api/v1/query", params={"query": 'up{job="vllm"} == 1'}, timeout=10
    ).json()
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def _firing_notifications(cluster: Cluster, path: str) -> list[dict[str, Any]]:
    return [n for n in cluster.notifications(path) if n.get("status") == "firing"]
