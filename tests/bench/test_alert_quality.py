"""The alert-quality benchmark: scoring on hand-made inputs; one tiny run through promtool and Prometheus."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from quality.evaluate import Episode, RunOutcome, firing_steps, group_episodes, score
from quality.node import Timing, engine_url
from quality.openmetrics import names_read_by
from quality.prom import Prometheus, load_rules
from quality.report import markdown
from quality.runs import RunSpec, evaluate_rule, gather_blocks, generate
from quality.scenarios import During, Incident, Plan, PlanScenario, flat
from quality.targets import summary, targets
from quality.truth import TruthWindow

from servescope.bundle.alerts import BUILD_DIR as ALERTS_BUILD
from servescope.sim.fault_scenarios import EngineFault, Window

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


# --- `for` and episodes -------------------------------------------------------------------------------


def test_an_alert_fires_once_its_expression_held_for_the_whole_for_duration() -> None:
    held = [30.0 * i for i in range(21)]  # 0 .. 600 s
    assert firing_steps(held, 300, 30) == [30.0 * i for i in range(10, 21)]
    assert firing_steps(held, 0, 30) == held
    assert firing_steps(held, 601, 30) == []


def test_one_missed_evaluation_resets_the_pending_clock() -> None:
    held = [t for t in range(0, 601, 30) if t != 270]
    # Pending since 0: fires at 120..240; the gap at 270 restarts it at 300, firing again from 420.
    assert firing_steps(held, 120, 30) == [120, 150, 180, 210, 240, 420, 450, 480, 510, 540, 570, 600]
    assert group_episodes(firing_steps(held, 120, 30), 30) == [(120, 240), (420, 600)]


@pytest.mark.parametrize(
    ("held", "for_s", "keep_s", "fired"),
    [
        # Fired at 60, its expression stops after 90: kept firing through 90 + 60, then resolved.
        ([0, 30, 60, 90], 60, 60, [60, 90, 120, 150]),
        # Held again within the keep: one episode, no new `for`.
        ([0, 30, 60, 90, 180, 210], 60, 60, [60, 90, 120, 150, 180, 210, 240, 270]),
        # Held again after the keep ran out: pending again from 300, firing again at 360.
        ([0, 30, 60, 300, 330, 360], 60, 60, [60, 90, 120, 360, 390, 420]),
        # Never fired: nothing to keep.
        ([0, 30, 120], 60, 600, []),
    ],
)
def test_keep_firing_for_holds_a_fired_alert_through_short_gaps(
    held: list[float], for_s: float, keep_s: float, fired: list[float]
) -> None:
    assert firing_steps(held, for_s, 30, keep_s) == fired


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
    meta |= {"prometheus": "2", "step_s": 30, "lookback": "1m", "scrape_s": 30, "nvml_s": 5}
    meta["summary"] = summary(scores, rates)
    page = markdown(scores, [], [1, 3], meta, targets(scores, rates))
    assert "| `ServescopeGpuSaturated` | steady | 3 | 30.0 min | 35.0 min | gpu=1 |" in page
    assert page.splitlines()[2] == "| measure | value |"  # the headline table comes first


# --- end to end ---------------------------------------------------------------------------------------


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
    return Plan("tiny-down", "engine 1 answers 503 from 2 to 12 min", 960.0, scenario, (incident,))


@pytest.mark.e2e
def test_a_tiny_run_through_promtool_and_prometheus_detects_the_engine_down(tmp_path: Path) -> None:
    if not (shutil.which("promtool") and shutil.which("prometheus")):
        pytest.fail("promtool and prometheus are needed: `make tools` installs Debian's prometheus package")
    alerts, _ = load_rules(RULES)
    plan = _tiny_plan()
    generated = generate(
        RunSpec(plan.name, 1, 0), plan, names_read_by(a.expr for a in alerts), tmp_path, Timing()
    )
    assert [(w.start, w.end) for w in generated.windows] == [(120.0, 720.0)]
    with Prometheus(gather_blocks(tmp_path)) as prom:
        spec = generated.spec
        gpus = prom.query_range("servescope_gpu_up", spec.wall_start, spec.wall_start + 960, 30)
        assert {s["metric"]["gpu"] for s in gpus} == {"0", "1"}
        episodes = [e for rule in alerts for e in evaluate_rule(prom, spec, plan.duration, rule, 30.0)]
    assert prom.process is not None and prom.process.poll() is not None  # stopped
    scores = score(
        [RunOutcome(plan.name, 1, generated.windows, tuple(episodes))], {a.name: a.severity for a in alerts}
    )
    down = scores.alerts["ServescopeServingEndpointDown"]
    # First failing scrape at 120 s, `for: 5m`: fires at 420 s and resolves after the restart at 720 s.
    assert [(e.start, e.end, dict(e.labels)["endpoint"]) for e in episodes if e.alert == down.alert] == [
        (420.0, 690.0, engine_url(1))
    ]
    assert (down.precision, down.recall, down.latencies) == (1.0, 1.0, [300.0])
    assert scores.false_positives == []
