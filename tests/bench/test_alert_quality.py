"""The alert-quality benchmark: scoring on hand-made inputs; the rule engine's episodes; one tiny run through
promtool."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from bench.quality import rule_engine
from bench.quality.evaluate import Episode, RunOutcome, score
from bench.quality.library import pages_truth
from bench.quality.node import Timing, engine_url
from bench.quality.report import markdown
from bench.quality.runs import RunSpec, generate
from bench.quality.scenarios import During, Incident, Plan, PlanScenario, flat
from bench.quality.targets import summary, targets
from bench.quality.truth import TruthWindow
from servescope.bundle.alerts import BUILD_DIR as ALERTS_BUILD
from servescope.bundle.alerts.bundle import all_alerts
from servescope.core.config import AlertsConfig
from servescope_sim.fault_scenarios import EngineFault, Window

RULES = ALERTS_BUILD / "rules.yaml"
Labels = tuple[tuple[str, str], ...]
GPU0: Labels = (("gpu", "0"),)
GPU1: Labels = (("gpu", "1"),)


def _episode(
    alert: str,
    start: float,
    labels: Labels = GPU0,
    *,
    severity: str = "warning",
    scenario: str = "s",
    seed: int = 1,
) -> Episode:
    return Episode(alert, severity, scenario, seed, labels, start, start + 300)


def _window(
    start: float,
    end: float,
    labels: Labels = GPU0,
    *,
    expect: tuple[str, ...] = ("AlertX",),
    accept: tuple[str, ...] = (),
    grace: float = 0.0,
    oom: bool = False,
) -> TruthWindow:
    return TruthWindow("incident", start, end, expect, accept, labels, grace, oom)


# --- scoring ------------------------------------------------------------------------------------------


def test_precision_recall_latency_and_false_positives_by_hand() -> None:
    windows = (
        _window(600, 1800, expect=("AlertX", "AlertZ"), accept=("AlertY",)),
        _window(3000, 4000, GPU1, grace=300),
    )
    true_x = _episode("AlertX", 1200)  # detects the first window 600 s after it started
    again_x = _episode("AlertX", 1600)  # resolved and fired again in the same window: a repeat
    wrong_gpu = _episode("AlertX", 1200, GPU1)  # the second window has not started yet: false
    late_x = _episode("AlertX", 4200, GPU1)  # inside the grace: not false, but too late to detect
    accepted = _episode("AlertY", 900)
    fleet = _episode("AlertZ", 700, ())  # a fleet-wide alert has no gpu label to compare
    info = _episode("AlertI", 100, severity="info")
    heartbeat = _episode("ServescopeWatchdog", 0, (), severity="info")
    outside = _episode("AlertY", 2500)  # accepted only inside the window
    episodes = (again_x, true_x, wrong_gpu, late_x, accepted, fleet, info, heartbeat, outside)
    run = RunOutcome("s", 1, windows, episodes)
    severities = {a: "warning" for a in ("AlertX", "AlertY", "AlertZ")} | {
        "AlertI": "info",
        "ServescopeWatchdog": "info",
    }

    scores = score([run], severities)

    x, y, z = (scores.alerts[a] for a in ("AlertX", "AlertY", "AlertZ"))
    assert (x.episodes, x.true, x.false, x.incidents, x.detected, x.repeats) == (4, 3, 1, 2, 1, 1)
    assert x.precision == 0.75
    assert x.recall == 0.5
    assert x.latencies == [600]
    assert (y.episodes, y.true, y.precision, y.recall) == (2, 1, 0.5, None)
    assert (z.precision, z.recall, z.latency_p50) == (1.0, 1.0, 100)
    assert scores.false_positives == [wrong_gpu, outside]
    assert [(m.alert, m.start) for m in scores.missed] == [("AlertX", 3000)]
    assert scores.info == [info]
    assert "ServescopeWatchdog" not in scores.alerts


def test_leak_lead_time_is_counted_back_from_the_oom() -> None:
    leak = _window(600, 4200, expect=("ServescopeGpuMemoryLeakSuspected",), oom=True)
    early = _episode("ServescopeGpuMemoryLeakSuspected", 1500)
    run = RunOutcome("leak-40", 2, (leak,), (early,))
    scores = score(
        [run],
        {"ServescopeGpuMemoryLeakSuspected": "warning"} | {"ServescopeGpuMemoryExhaustionSoon": "critical"},
    )
    leads = {lt.alert: lt.lead for lt in scores.lead_times}
    assert leads == {"ServescopeGpuMemoryLeakSuspected": 2700, "ServescopeGpuMemoryExhaustionSoon": None}


def test_the_report_lists_every_false_positive_and_judges_the_targets() -> None:
    leak = _window(600, 4200, expect=("ServescopeGpuMemoryLeakSuspected",), oom=True)
    late = _episode("ServescopeGpuMemoryLeakSuspected", 3600, scenario="leak-40")  # 10 min before the OOM
    stray = _episode("ServescopeGpuSaturated", 1800, GPU1, scenario="steady", seed=3)
    runs = [RunOutcome("leak-40", 1, (leak,), (late,)), RunOutcome("steady", 3, (), (stray,))]
    severities = {a: "warning" for a in ("ServescopeGpuMemoryLeakSuspected", "ServescopeGpuSaturated")}
    scores = score(runs, severities | {"ServescopeGpuMemoryExhaustionSoon": "critical"})
    rates = {"leak-40": 40.0}

    # Per-alert precision, overall precision, recall, leak lead (10 min < 15 min): met or not.
    assert [t.met for t in targets(scores, rates)] == [False, False, True, False]
    assert summary(scores, rates) == {
        "precision": 0.5,
        "recall": 1.0,
        "false_positives": 1.0,
        "leak_lead_minutes": 10.0,
    }
    meta = {"machine": {}, "timing_s": {"total": 1.0}, "rules": {"file": "r", "stale": False}, "samples": 1}
    meta |= {"promtool": "2", "step_s": 30, "scrape_s": 30, "nvml_s": 5}
    meta["summary"] = summary(scores, rates)
    page = markdown(scores, [], [1, 3], meta, targets(scores, rates))
    assert "| `ServescopeGpuSaturated` | steady | 3 | 30.0 min | 35.0 min | gpu=1 |" in page
    assert page.splitlines()[2] == "| measure | value |"  # the headline table comes first


# --- the rule engine's episodes ----------------------------------------------------------------------

TINY_RULES = {
    "groups": [
        {
            "name": "g",
            "rules": [
                {
                    "alert": "Kept",
                    "expr": "x > 1",
                    "for": "1m",
                    "keep_firing_for": "2m",
                    "labels": {"severity": "critical"},
                },
                {"alert": "Plain", "expr": "x > 1", "for": "2m", "labels": {"severity": "warning"}},
            ],
        }
    ]
}


@pytest.mark.e2e
def test_episodes_are_what_promtool_s_rule_engine_fired(tmp_path: Path) -> None:
    """`for`, keep_firing_for and staleness are the engine's: read back from ALERTS_FOR_STATE, per episode."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(TINY_RULES))
    # x over 1 from 2m to 6m, a 3-minute gap in the scrapes (a staleness marker), over 1 again 10m to 12m.
    per_step: list[float | None] = [0, 0, *[2] * 5, None, None, None, *[2] * 3, 0, 0, 0, 0, 0]
    fired = rule_engine.run(
        rules, [rule_engine.series("x", {"job": "j"}, per_step)], 900, tmp_path, interval="1m"
    )
    episodes = [(f.alert, f.first, f.last) for f in fired]
    # Kept: fires at 3m, kept 2 minutes through the gap (7m, 8m), pending again from 10m, firing 11m-12m, kept
    # to 14m. Plain: `for: 2m` from 2m fires at 4m-6m; the gap resets it; pending from 10m, it fires at 12m.
    assert episodes == [
        ("Kept", 180.0, 480.0),
        ("Plain", 240.0, 360.0),
        ("Kept", 660.0, 840.0),
        ("Plain", 720.0, 720.0),
    ]
    assert all(dict(f.labels)["job"] == "j" for f in fired)


def test_promtool_values_notation_writes_gaps_staleness_and_runs() -> None:
    assert (
        rule_engine.values([None, 1.0, 1.0, 1.0, None, None, 2.5, float("inf"), float("inf")])
        == "_ 1x2 stale _ 2.5 Inf Inf"
    )
    assert rule_engine.samples('{a="b", c="d \\"q\\""} 1.5E+02, {e="f"} 3E+00') == {
        (("a", "b"), ("c", 'd "q"')): 150.0,
        (("e", "f"),): 3.0,
    }
    assert rule_engine.samples("nil") == {}


def _tiny_plan() -> Plan:
    down = Window(120.0, 720.0)
    incident = Incident(
        "engine 1 down",
        During(down.start, down.end),
        ("ServescopeServingEndpointDown",),
        engine=1,
        grace_s=0.0,
    )
    scenario = PlanScenario(curve=flat(0.5), down=EngineFault(1, (1,), down))
    # The library's pages from the truth: one engine of two down is the model's availability burning.
    incidents = (incident, *pages_truth(AlertsConfig()))
    return Plan("tiny-down", "engine 1 answers 503 from 2 to 12 min", 960.0, scenario, incidents)


@pytest.mark.e2e
def test_a_tiny_node_run_through_promtool_detects_the_engine_down(tmp_path: Path) -> None:
    if not shutil.which("promtool"):
        pytest.fail("promtool is needed: `make tools` installs Debian's prometheus")
    plan = _tiny_plan()
    generated = generate(RunSpec(plan.name, 1), plan, RULES, tmp_path, Timing())
    outcome = generated.outcome
    assert [(w.start, w.end) for w in outcome.windows if w.incident == "engine 1 down"] == [(120.0, 720.0)]
    scores = score([outcome], {a.name: a.severity for a in all_alerts(AlertsConfig())})
    down = scores.alerts["ServescopeServingEndpointDown"]
    # Down from 120 s: its answering share over 10 minutes (the 4 it has at first) under half from about
    # 210 s, `for: 5m`: it fires within the outage, once.
    fired = [(e.start, dict(e.labels)["endpoint"]) for e in outcome.episodes if e.alert == down.alert]
    assert [endpoint for _, endpoint in fired] == [engine_url(1)]
    assert 420.0 <= fired[0][0] <= 720.0, fired
    assert (down.precision, down.recall) == (1.0, 1.0)
    page = scores.alerts["ServescopeAvailabilitySloBurnFast"]
    assert (page.precision, page.recall) == (1.0, 1.0)
    assert scores.false_positives == []
