"""promtool cases of going blind: the fleet's exporters down or gone page once, for the fleet; a GPU node
without an exporter is a ticket naming it; kube-state-metrics missing is a ticket that says what is lost.

Six GPU nodes per kube-state-metrics (node-a to node-f: node-e by its nvidia.com/gpu capacity, node-f by
the GPU Operator's label only), exporters on node-a to node-d, node-g without a GPU. 1 min samples and
evaluations; what pages is stated on ALERTS.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.alerts.pages import KSM_TARGET, firing_only, never_paged, pages_only
from tests.alerts.promtool import TARGET, case, check, fires, firing, run_promtool, series

MINUTES = 40
BLIND = "ServescopeMonitoringBlind"
ABSENT = "ServescopeExporterTargetsAbsent"
WITHOUT = "ServescopeGpuNodeWithoutExporter"
KSM_ABSENT = "ServescopeKubeStateMetricsAbsent"
DOWN = "ServescopeExporterDown"
EXPORTERS = ["node-a", "node-b", "node-c", "node-d"]
KSM_NODE = {"job": "kube-state-metrics", "instance": KSM_TARGET["instance"]}


def exporter(node: str) -> dict[str, str]:
    return {**TARGET, "instance": node}  # the ServiceMonitor relabels instance to the node's name


def cluster(gpus: str = "abcde", labelled: str = "f") -> list[dict[str, str]]:
    """kube-state-metrics' nodes: `gpus` with GPU capacity, `labelled` by the GPU Operator only, g without
    a GPU."""
    every = f"1x{MINUTES}"
    capacity = {**KSM_TARGET, "resource": "nvidia_com_gpu"}
    gpu_label = {"label_nvidia_com_gpu_present": "true"}
    nodes = sorted({*gpus, *labelled, "g"})
    return [
        *(series("kube_node_info", {**KSM_TARGET, "node": f"node-{n}"}, every) for n in nodes),
        *(series("kube_node_status_capacity", {**capacity, "node": f"node-{n}"}, every) for n in gpus),
        *(
            series("kube_node_labels", {**KSM_TARGET, "node": f"node-{n}", **gpu_label}, every)
            for n in labelled
        ),
    ]


def exporters(up: dict[str, str]) -> list[dict[str, str]]:
    """The exporters' `up` (expanding notation per node; a node not given answers throughout)."""
    return [series("up", exporter(node), up.get(node, f"1x{MINUTES}")) for node in EXPORTERS]


def without(node: str) -> dict[str, Any]:
    text = (
        f"GPU node {node} (nvidia.com/gpu capacity, or the GPU Operator's label) has no target of "
        'job="servescope": the DaemonSet does not run there (a taint it does not tolerate, a node selector, '
        "a pod that cannot start)."
    )
    return firing(WITHOUT, {"node": node}, text)


def blind(share: str) -> dict[str, Any]:
    text = (
        f"{share} of the exporters expected (one per GPU node) do not answer (bound 50%): no GPU, memory "
        "or serving alert can fire for their nodes. One page for the fleet; the ServescopeExporterDown "
        "tickets of each node are muted under it."
    )
    return firing(BLIND, {}, text)


# Two GPU nodes the DaemonSet does not reach: a ticket each, no page (2 of 6 exporters missing).
NODES_WITHOUT = case(
    f"{WITHOUT}: GPU nodes the DaemonSet does not reach",
    [*cluster(), *exporters({})],
    check(WITHOUT, "14m"),  # pending since 0m
    check(WITHOUT, "15m", without("node-e"), without("node-f")),
    check(BLIND, "20m"),
    check(KSM_ABSENT, "20m"),  # kube-state-metrics is there
    check(ABSENT, "20m"),  # the exporters' targets are there
    exprs=[never_paged(f"{MINUTES}m", f"{MINUTES}m")],
)
# Every exporter stops answering at 10m (a NetworkPolicy, a broken image): 6 of 6 blind, one page from
# 15m for the fleet; the four exporters' tickets fire too (muted under the page in Alertmanager).
FLEET_DOWN = case(
    f"{BLIND}: every exporter down",
    [*cluster(), *exporters({node: "1x9 0x31" for node in EXPORTERS})],
    check(BLIND, "14m"),  # pending since 10m
    check(BLIND, "15m", blind("100%")),
    check(BLIND, "31m", blind("100%")),
    exprs=[pages_only("20m", (BLIND, {}))],
)
# A quarter of the fleet down is one ticket per node, no page.
ONE_DOWN = case(
    f"{BLIND}: one exporter of four down",
    [*cluster("abcd", ""), *exporters({"node-a": "1x9 0x20 1x10"})],
    check(BLIND, "20m"),
    fires(
        DOWN,
        "15m",
        exporter("node-a"),
        "node-a has been down for 5m: every GPU and serving alert of that node is blind.",
    ),
    exprs=[never_paged(f"{MINUTES}m", f"{MINUTES}m")],
)
# The DaemonSet is deleted at 10m: its targets go (staleness markers). No target at all pages from 15m,
# and the blind fleet too (the same pager group; Alertmanager mutes the second under the first).
ABSENT_TEXT = (
    'No target matches job="servescope": the exporter DaemonSet was deleted, its ServiceMonitor lost, or the '
    "selector no longer matches; every GPU and serving alert is blind."
)
DELETED = case(
    f"{ABSENT}: the DaemonSet deleted",
    [*cluster(), *exporters({node: "1x9 stale _x30" for node in EXPORTERS})],
    check(ABSENT, "14m"),  # pending since 10m
    fires(ABSENT, "15m", {"job": "servescope"}, ABSENT_TEXT),
    check(BLIND, "15m", blind("100%")),
    exprs=[pages_only("20m", (ABSENT, {"job": "servescope"}), (BLIND, {}))],
)
# Without kube-state-metrics: a ticket says so after 15m, and the fleet expected is the most exporters
# seen lately: 2 of 4 down from 10m is half of it, a page.
KSM_TEXT = (
    'No kube_node_info{job="kube-state-metrics"}: GPU nodes without an exporter are not found, and pods '
    "being deleted and Deployments scaled down are judged from the engines' series alone. Install "
    "kube-state-metrics, fix kube_state_metrics_selector, or set kube_state_metrics: false."
)
NO_KSM = case(
    f"{KSM_ABSENT}: no kube-state-metrics",
    exporters({"node-a": "1x9 0x31", "node-b": "1x9 0x31"}),
    check(KSM_ABSENT, "14m"),
    fires(KSM_ABSENT, "15m", {"job": "kube-state-metrics"}, KSM_TEXT),
    check(WITHOUT, "20m"),
    check(BLIND, "15m", blind("50%")),
    exprs=[
        firing_only(
            "20m",
            (KSM_ABSENT, {"job": "kube-state-metrics"}),
            (BLIND, {}),
            (DOWN, exporter("node-a")),
            (DOWN, exporter("node-b")),
            ("ServescopeGpuMetricsAbsent", {"job": "servescope"}),
            ("ServescopeServingMetricsAbsent", {"job": "servescope"}),
            ("ServescopeDerivedMetricsAbsent", {"job": "servescope"}),
        )
    ],
)

CASES: list[dict[str, Any]] = [NODES_WITHOUT, FLEET_DOWN, ONE_DOWN, DELETED, NO_KSM]


@pytest.mark.e2e
def test_blindness_pages_once_and_names_the_nodes_unseen(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)
