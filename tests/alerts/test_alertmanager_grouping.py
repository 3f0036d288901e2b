"""One page per incident, judged by a real Alertmanager: the receiver snippet `deploy render` writes,
merged as its header says into kube-prometheus-stack's default configuration (whose root route groups by
`namespace`), with the alerts of three incidents and of a busy node posted to it.

A page is a group of the pager receiver with an alert that is not inhibited: what a pager integration
(PagerDuty's dedup key is the group key) opens an incident for. The groups and each alert's status are
Alertmanager's own (`/api/v2/alerts/groups`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from servescope.bundle.alerts.alertmanager import PAGER, TICKET
from tests.alerts.alertmanager import (
    KPS_DEFAULT,
    RECEIVER,
    TARGET,
    Alertmanager,
    alert,
    merged,
    running_alertmanager,
)

DEEPSEEK = {**TARGET, "model_name": "deepseek", "engine": "0", "endpoint": "http://10.1.0.5:8000/metrics"}
MISTRAL_DOWN = {**TARGET, "model_name": "mistral", "endpoint": "http://10.1.4.2:8000/metrics"}


def incidents() -> list[dict[str, str]]:
    """Three incidents and a busy node, as the rules label their alerts."""
    gpus = [{**TARGET, "hostname": "node-a", "gpu": str(n), "uuid": f"GPU-000{n}"} for n in range(8)]
    return [
        # deepseek's TTFT burns while engine 0 is out of KV on saturated GPUs: both pages, the causes.
        alert("ServescopeTtftSloBurnFast", {"model_name": "deepseek"}),
        alert("ServescopeKvPressureHurtingRequests", {**DEEPSEEK, "hostname": "node-a"}),
        alert("ServescopeGpuSaturatedKvPressure", {**DEEPSEEK, "hostname": "node-a"}),
        alert("ServescopeKvCachePressure", DEEPSEEK),
        alert("ServescopeRequestQueueBuilding", DEEPSEEK),
        alert("ServescopeTtftSloBurnSlow", {"model_name": "deepseek"}),
        *(alert("ServescopeGpuSaturated", gpu) for gpu in gpus),
        # One of mistral's engines crash-loops: the availability page and the endpoint's ticket.
        alert("ServescopeAvailabilitySloBurnFast", {"model_name": "mistral"}),
        alert("ServescopeServingEndpointDown", MISTRAL_DOWN),
        # The DaemonSet is gone: both blindness pages and what they explain.
        alert("ServescopeExporterTargetsAbsent", {"job": "servescope"}),
        alert("ServescopeMonitoringBlind", {}),
        alert("ServescopeGpuMetricsAbsent", {"job": "servescope"}),
        *(alert("ServescopeExporterDown", {**TARGET, "instance": n}) for n in ("node-b", "node-c")),
        # A cluster alert: the root's routes and grouping are left to it.
        {"alertname": "KubePodCrashLooping", "severity": "warning", "namespace": "llm", "pod": "x"},
    ]


@pytest.fixture(scope="module")
def groups(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[dict[str, Any]]]]:
    with running_alertmanager(tmp_path_factory.mktemp("alertmanager"), merged()) as am:
        posted = incidents()
        am.fire(*posted)
        yield _settled(am, posted)


def _settled(am: Alertmanager, posted: list[dict[str, str]]) -> dict[str, list[dict[str, Any]]]:
    """Every receiver's groups once each posted alert is in them and the inhibitions are applied (both
    asynchronous in Alertmanager)."""
    wanted = {PAGER: "critical", TICKET: "warning"}
    deadline = time.monotonic() + 15
    while True:
        found = {name: am.groups(name) for name in (PAGER, TICKET, "null")}
        counts = {name: sum(len(g["alerts"]) for g in found[name]) for name in wanted}
        expected = {
            name: sum(a.get("severity") == sev and "bundle" in a for a in posted)
            for name, sev in wanted.items()
        }
        states = {a["status"]["state"] for name in wanted for g in found[name] for a in g["alerts"]}
        if (counts == expected and "unprocessed" not in states) or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _active(group: dict[str, Any]) -> list[str]:
    return sorted(a["labels"]["alertname"] for a in group["alerts"] if a["status"]["state"] == "active")


@pytest.mark.e2e
def test_three_incidents_are_three_pages_grouped_by_model(groups: dict[str, list[dict[str, Any]]]) -> None:
    pages = {g["labels"].get("model_name", ""): g for g in groups[PAGER]}
    # The pager groups by model, not by the root's namespace: the snippet's route sets its own group_by.
    assert [g["labels"] for g in groups[PAGER]] and all("namespace" not in g["labels"] for g in groups[PAGER])
    assert sorted(pages) == ["", "deepseek", "mistral"]
    assert _active(pages["deepseek"]) == ["ServescopeKvPressureHurtingRequests"]  # names the engine and cause
    assert _active(pages["mistral"]) == ["ServescopeAvailabilitySloBurnFast"]
    assert _active(pages[""]) == ["ServescopeExporterTargetsAbsent"]
    suppressed = {
        a["labels"]["alertname"]: a["status"]["inhibitedBy"]
        for g in groups[PAGER]
        for a in g["alerts"]
        if a["status"]["state"] == "suppressed"
    }
    assert set(suppressed) == {"ServescopeTtftSloBurnFast", "ServescopeMonitoringBlind"}


@pytest.mark.e2e
def test_the_causes_are_muted_under_their_page_and_visible(groups: dict[str, list[dict[str, Any]]]) -> None:
    tickets = [a for g in groups[TICKET] for a in g["alerts"]]
    # Every ticket is explained by a page (the model's, or the blind fleet's, or the KV ticket of its node):
    # nothing reaches the ticket queue during these incidents, and each shows what mutes it.
    assert tickets
    assert [a["labels"]["alertname"] for a in tickets if a["status"]["state"] != "suppressed"] == []
    assert all(a["status"]["inhibitedBy"] for a in tickets)
    # The busy node's eight saturated GPUs are one ticket group, not eight.
    saturated = [g for g in groups[TICKET] if g["labels"].get("alertname") == "ServescopeGpuSaturated"]
    assert len(saturated) == 1 and len(saturated[0]["alerts"]) == 8


@pytest.mark.e2e
def test_the_cluster_s_own_alerts_keep_the_root_s_grouping(groups: dict[str, list[dict[str, Any]]]) -> None:
    foreign = [
        g
        for g in groups["null"]
        if any(a["labels"]["alertname"] == "KubePodCrashLooping" for a in g["alerts"])
    ]
    assert [g["labels"] for g in foreign] == [{"namespace": "llm"}]


def test_every_route_of_the_snippet_sets_its_own_group_by() -> None:
    routes = yaml.safe_load(RECEIVER.read_text())["route"]["routes"]
    assert routes and all(route.get("group_by") for route in routes), routes
    by_receiver = {route["receiver"]: route["group_by"] for route in routes}
    assert by_receiver[PAGER] == ["model_name"]
    assert by_receiver[TICKET] == ["alertname", "instance", "model_name"]


def test_the_merged_configuration_is_what_the_header_says(tmp_path: Path) -> None:
    config = merged()
    assert [r["name"] for r in config["receivers"]].count("null") == 1
    assert config["route"]["routes"][-1] == KPS_DEFAULT["route"]["routes"][0]
