"""promtool cases of planned changes and engines that fail, in both topologies: a rolling update of 8
replicas, a scale-down from 3 to 2 and a pod moved to another node fire nothing; a crash-looping engine is
one ticket for its endpoint and one page for its model, without a gap when the exporter's scrapes fail.

What the on-call engineer sees is stated on ALERTS (tests/alerts/pages.py); the engines' series follow
minute-by-minute states (tests/alerts/fleet.py). 1 min samples and evaluations, kube-state-metrics there;
10 s ones for a crash loop that answers only between the minutes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from servescope.bundle.alerts.bundle import rule_file
from servescope.core.config import AlertsConfig
from tests.alerts.fleet import Engine
from tests.alerts.pages import fired_throughout, firing_only, nothing_fired, pages_only, quiet_node, sampled
from tests.alerts.promtool import TARGET, case, check, fires, run_promtool

MINUTES = 70
DOWN = "ServescopeServingEndpointDown"
PAGE = "ServescopeAvailabilitySloBurnFast"


def _node_b(minutes: int) -> list[dict[str, str]]:
    b = {**TARGET, "instance": "node-b:9108"}
    return [series for series in quiet_node(minutes, b) if "kube" not in series["series"]] + [
        sampled(
            "kube_node_info",
            {"job": "kube-state-metrics", "instance": "ksm:8080", "node": "node-b"},
            [1.0] * (minutes + 1),
        ),
    ]


def rollout(podmonitor: bool) -> dict[str, Any]:
    """8 replicas replaced 2 at a time every 12 min from 10m (maxSurge 2, maxUnavailable 0): the new pods
    load their model for 5 min, then the old ones are deleted: their engines stop a minute before
    kube-state-metrics says their pods are being deleted, and their targets outlive the pods a minute."""
    states: list[tuple[Engine, str]] = []
    for k in range(4):
        start = 10 + 12 * k
        for i in (2 * k, 2 * k + 1):
            old = Engine("deepseek", f"ds-old-{i}", f"10.1.0.{10 + i}")
            new = Engine("deepseek", f"ds-new-{i}", f"10.1.1.{10 + i}")
            states.append((old, "U" * (start + 5) + "STG" + "-" * (MINUTES - start - 7)))
            states.append((new, "-" * start + "L" * 5 + "U" * (MINUTES - start - 4)))
    inputs = [s for engine, st in states for s in engine.series(st, podmonitor)]
    return case(
        f"{'podmonitor' if podmonitor else 'exporter'}: a rolling update of 8 replicas",
        [*quiet_node(MINUTES), *inputs],
        exprs=[nothing_fired(f"{MINUTES}m", f"{MINUTES}m")],
    )


def scale_down_and_move(podmonitor: bool) -> dict[str, Any]:
    """qwen scaled from 3 to 2 at 20m; llama's pod moved from node-a to node-b at 30m."""
    qwen = [Engine("qwen", f"qwen-{i}", f"10.1.2.{i}") for i in range(3)]
    moved_from = Engine("llama", "llama-a", "10.1.3.1")
    moved_to = Engine("llama", "llama-b", "10.2.3.1", node="node-b")
    inputs = [
        *qwen[0].series("U" * (MINUTES + 1), podmonitor),
        *qwen[1].series("U" * (MINUTES + 1), podmonitor),
        *qwen[2].series("U" * 20 + "STG" + "-" * (MINUTES - 22), podmonitor),
        *moved_from.series("U" * 30 + "ST" + "-" * (MINUTES - 31), podmonitor),
        *moved_to.series("-" * 31 + "L" * 6 + "U" * (MINUTES - 36), podmonitor),
    ]
    return case(
        f"{'podmonitor' if podmonitor else 'exporter'}: a scale-down from 3 to 2 and a pod moved",
        [*quiet_node(MINUTES), *_node_b(MINUTES), *inputs],
        exprs=[nothing_fired(f"{MINUTES}m", f"{MINUTES}m")],
    )


CRASHING = Engine("mistral", "mistral-1", "10.1.4.2")
STEADY = Engine("mistral", "mistral-0", "10.1.4.1")
# Up for 10 min, then a crash loop: 8 minutes down, 2 up (the server listens again before it crashes).
CRASH_LOOP = "U" * 10 + ("D" * 8 + "UU") * 6 + "D"


def crash_loop(podmonitor: bool, gap: range = range(0)) -> dict[str, Any]:
    """One of mistral's 2 engines crash-loops from 10m: its endpoint's ticket from 20m and the model's
    page (50% of its endpoints down, a 50x burn) from 14m, each one episode however the loop and the
    exporter's scrapes come and go (the 1 h window's share shows: 4 of 14 minutes' samples half down).
    `gap`: minutes in which Prometheus cannot scrape the exporter."""
    topology = "podmonitor" if podmonitor else "exporter"
    exporter_up = [0.0 if minute in gap else 1.0 for minute in range(MINUTES + 1)]
    inputs = [
        *(s for s in quiet_node(MINUTES) if not s["series"].startswith("up{")),
        sampled("up", TARGET, exporter_up),
        *STEADY.series("U" * (MINUTES + 1), podmonitor, gap=gap),
        *CRASHING.series(CRASH_LOOP, podmonitor, gap=gap),
    ]
    down, model = CRASHING.down_labels(podmonitor), {"model_name": "mistral"}
    description = (
        f"mistral endpoint {CRASHING.endpoint} on {down['instance']} answered less than half the time over "
        "10m, for 5m, while its pod is neither gone nor being deleted: the engine crashed, crash-loops or "
        "hangs."
    )
    page = (
        "mistral: 14.29% of the time its endpoints that should serve did not answer or made no progress "
        "(objective 99.00%); at this rate the 30-day budget is gone in under 5 days. The endpoints' "
        "ServescopeServingEndpointDown and ServescopeSchedulerStuck tickets, muted under this page, say "
        "which."
    )
    return case(
        f"{topology}: a crash-looping engine{' through gaps in the scrapes' if gap else ''}",
        inputs,
        check(DOWN, "19m"),  # pending since 16m: more than half of the 10 min down
        fires(DOWN, "20m", down, description),
        check(PAGE, "13m"),  # pending since 12m: the share is judged 1 min late (planned_change_lag)
        fires(PAGE, "14m", model, page),
        exprs=[
            firing_only("40m", (DOWN, down), (PAGE, model)),
            pages_only("40m", (PAGE, model)),
            # Every evaluation from the first firing (both ends included): one episode each.
            fired_throughout(DOWN, down, f"{MINUTES}m", f"{MINUTES - 20}m", MINUTES - 20 + 1),
            fired_throughout(PAGE, model, f"{MINUTES}m", f"{MINUTES - 14}m", MINUTES - 14 + 1),
        ],
    )


# Without the kubelet's answer (no pod named) the exporter keeps a lost endpoint down 15 min, then drops
# it: a dead engine is still an endpoint down (for 6 h), unless its node has as many healthy endpoints
# again as at its best (the engine came back at another address, as llama-b on node-b does at 60m). Once
# dropped, an endpoint no longer counts for its model's availability: that page ends without the
# evidence the kubelet gives where there is one.
LONG = 120
DEAD = Engine("mistral", "mistral-bare", "10.1.5.1")
GONE_B = Engine("llama", "llama-bare", "10.2.5.1", node="node-b")
BACK_B = Engine("llama", "llama-back", "10.2.5.2", node="node-b")
FORGOTTEN = case(
    "exporter: an engine forgotten while down, without the kubelet",
    [
        *quiet_node(LONG),
        *_node_b(LONG),
        *DEAD.series("U" * 10 + "D" * 15 + "-" * (LONG - 24), False, attributed=False),
        *GONE_B.series("U" * 10 + "D" * 15 + "-" * (LONG - 24), False, attributed=False),
        *BACK_B.series("-" * 60 + "U" * (LONG - 59), False, attributed=False),
    ],
    check(DOWN, "19m"),
    exprs=[
        # Each model's only endpoint is down: each pages (kept 15 min past its last sample).
        firing_only(
            "40m",
            (DOWN, DEAD.down_labels(False)),
            (DOWN, GONE_B.down_labels(False)),
            (PAGE, {"model_name": "llama"}),
            (PAGE, {"model_name": "mistral"}),
            # No engine of the fleet answers: no serving series at all (15 min after the last went).
            ("ServescopeServingMetricsAbsent", {"job": "servescope"}),
        ),
        firing_only("2h", (DOWN, DEAD.down_labels(False))),
    ],
)
CASES = [
    rollout(False),
    scale_down_and_move(False),
    crash_loop(False),
    crash_loop(False, gap=range(30, 33)),
    FORGOTTEN,
]
POD_CASES = [rollout(True), scale_down_and_move(True), crash_loop(True)]


def pod_rules(tmp_path: Path) -> Path:
    path = tmp_path / "rules-podmonitor.yaml"
    path.write_text(yaml.safe_dump(rule_file(AlertsConfig(engine_topology="podmonitor")), sort_keys=False))
    return path


# A crash loop seen every 10 s: the engine answers 10 s of each minute, never on the minute (a failed scrape
# marks its series stale at once). It served before the loop, so it should serve: the model pages.
FLICKER = "DDDUDD"
FLICKERING = Engine("crashy", "crashy-1", "10.1.6.2")


def flickering_crash_loop() -> dict[str, Any]:
    minutes = 20
    inputs = [
        sampled("up", TARGET, [1.0] * (6 * minutes + 1)),  # the exporter answers
        *Engine("crashy", "crashy-0", "10.1.6.1").series("U" * (6 * minutes + 1), True),
        *FLICKERING.series(FLICKER * minutes + "D", True),
    ]
    return case(
        "podmonitor: a crash loop answering seconds at a time, never on the minute",
        inputs,
        interval="10s",
        exprs=[pages_only("15m", (PAGE, {"model_name": "crashy"}))],
    )


@pytest.mark.e2e
def test_a_crash_loop_answering_only_between_the_minutes_pages(tmp_path: Path) -> None:
    run_promtool([flickering_crash_loop()], tmp_path, evaluation_interval="10s", rules=pod_rules(tmp_path))


@pytest.mark.e2e
def test_planned_changes_are_quiet_and_a_crash_loop_pages_once_exporter_topology(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)


@pytest.mark.e2e
def test_planned_changes_are_quiet_and_a_crash_loop_pages_once_podmonitor_topology(tmp_path: Path) -> None:
    run_promtool(POD_CASES, tmp_path, rules=pod_rules(tmp_path))
