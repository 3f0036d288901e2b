"""`canary analyze` and the rollout controllers' queries against a real Prometheus backfilled with
rollouts whose truth is known (tests/canary/rollouts.py): a canary twice as slow, an equal one, one with
too little traffic, and 100 equal canaries drawn with different seeds."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.quality.prom import Prometheus as PrometheusProcess
from servescope.bundle.alerts.rules_canary import worse
from servescope.deploy.canary import CanaryOptions, argo, flagger_analysis, flagger_templates
from servescope.deploy.options import DeployOptions
from servescope.kit.canary.analysis import analyze
from servescope.kit.canary.prometheus import Prometheus
from tests.canary.rollouts import (
    END,
    LITTLE,
    PODMONITOR,
    SAME,
    SEEDS,
    START,
    WORSE,
    Rollout,
    all_rollouts,
    backfill,
)

SERVESCOPE = str(Path(sys.executable).with_name("servescope"))
OPTIONS = DeployOptions(topology="podmonitor")
CANARY = CanaryOptions(canary="argo", canary_namespace="serving", canary_model="x")
METRICS = (
    "ttft-p99-ratio",
    "itl-p99-ratio",
    "ttft-slo-miss-increase",
    "e2e-slo-miss-increase",
    "error-increase",
)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tsdb = backfill(tmp_path_factory.mktemp("rollouts"), all_rollouts())
    with PrometheusProcess(tsdb) as served:
        yield f"http://127.0.0.1:{served.port}"


def analyze_command(
    prometheus: str, shown: Rollout, out: Path, *extra: str, at: float = END
) -> subprocess.CompletedProcess[str]:
    argv = [SERVESCOPE, "canary", "analyze", "--prometheus", prometheus, "--model", shown.model]
    argv += ["--canary", shown.canary.revision, "--topology", "podmonitor", "--at", f"{at:.0f}"]
    argv += ["--json", str(out / "analysis.json"), "--markdown", str(out / "analysis.md")]
    argv += ["--html", str(out / "analysis.html"), *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def verdicts(out: Path) -> dict[str, str]:
    found = json.loads((out / "analysis.json").read_text())
    return {"overall": found["verdict"], **{sli["name"]: sli["verdict"] for sli in found["slis"]}}


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize(
    ("shown", "code", "truth"),
    [
        # Twice as slow to the first token: its TTFT and its share over the 0.5 s bound are worse.
        (WORSE, 1, {"overall": "rollback", "ttft": "rollback", "ttft_slo": "rollback"}),
        # The stable's distributions: every SLI promotes.
        (SAME, 0, {"overall": "promote", "ttft": "promote", "ttft_slo": "promote", "itl": "promote"}),
        # Twice as slow but 30 requests in 10 minutes: not a verdict.
        (LITTLE, 2, {"overall": "inconclusive", "ttft": "inconclusive", "ttft_slo": "inconclusive"}),
    ],
    ids=["worse", "equal", "too-little-traffic"],
)
def test_each_rollout_gets_the_verdict_of_its_truth(
    prometheus: str, shown: Rollout, code: int, truth: dict[str, str], tmp_path: Path
) -> None:
    done = analyze_command(prometheus, shown, tmp_path)
    print(done.stdout)
    assert done.returncode == code, done.stdout + done.stderr
    found = verdicts(tmp_path)
    assert {name: found[name] for name in truth} == truth
    analysis = json.loads((tmp_path / "analysis.json").read_text())
    assert analysis["stable"] == shown.stable.revision  # the revision with most requests
    assert 0.09 < analysis["canary_share"] < 0.11 or shown is LITTLE
    ttft = next(sli for sli in analysis["slis"] if sli["name"] == "ttft")
    assert ttft["test"].startswith("Mann-Whitney") and ttft["why"]
    assert ttft["canary"]["requests"] > 0 and ttft["stable"]["requests"] > 10_000
    assert len(ttft["distribution"]["bounds"]) == 23  # vLLM's TTFT buckets, both revisions drawn
    markdown = (tmp_path / "analysis.md").read_text()
    assert f"# Canary analysis: {truth['overall']}" in markdown and "both distributions" in markdown
    assert "<svg" in (tmp_path / "analysis.html").read_text()


@pytest.mark.e2e
@pytest.mark.slow
def test_the_traffic_of_each_user_bucket_is_reported(prometheus: str, tmp_path: Path) -> None:
    analyze_command(prometheus, WORSE, tmp_path)
    buckets = json.loads((tmp_path / "analysis.json").read_text())["buckets"]
    by_revision: dict[str, set[str]] = {}
    for row in buckets:
        by_revision.setdefault(row["revision"], set()).add(row["bucket"])
    assert by_revision == {
        WORSE.canary.revision: {f"{b:02d}" for b in range(10)},
        WORSE.stable.revision: {f"{b:02d}" for b in range(10, 100)},
    }
    assert "Traffic per user bucket" in (tmp_path / "analysis.md").read_text()


@pytest.mark.e2e
@pytest.mark.slow
def test_false_rollbacks_over_100_equal_canaries(prometheus: str) -> None:
    """100 canaries drawn from the stable's own distributions (10 % of the traffic each): the share the
    analysis rolls back is its false-rollback rate, bounded by its alpha of 5 %."""
    found = [
        analyze(
            Prometheus(prometheus, END),
            PODMONITOR,
            seed.model,
            seed.canary.revision,
            stable=None,
            window="10m",
        )
        for seed in SEEDS
    ]
    rolled_back = [analysis.model for analysis in found if analysis.verdict == "rollback"]
    significant = sum(
        1
        for analysis in found
        for sli in analysis.slis
        if sli.effect and sli.effect.p_value < analysis.alpha_each
    )
    tests = sum(1 for analysis in found for sli in analysis.slis if sli.effect)
    print(
        f"false rollbacks: {len(rolled_back)} of {len(found)} ({len(rolled_back) / len(found):.1%}); "
        f"significant tests: {significant} of {tests}; verdicts: "
        f"{ {v: sum(a.verdict == v for a in found) for v in ('promote', 'rollback', 'inconclusive')} }"
    )
    assert all(analysis.verdict in ("promote", "rollback") for analysis in found)
    assert len(rolled_back) / len(found) <= 0.05, rolled_back


def argo_queries(shown: Rollout) -> dict[str, tuple[str, str]]:
    """Each AnalysisTemplate metric: its query with the Rollout's arguments, and its failureCondition."""
    values = {"model-name": shown.model, "canary-revision": shown.canary.revision}
    values["stable-revision"] = shown.stable.revision
    out = {}
    for metric in argo(OPTIONS, CANARY)[0]["spec"]["metrics"]:
        query = re.sub(
            r"\{\{args\.([a-z-]+)\}\}",
            lambda m: values[m.group(1)],
            metric["provider"]["prometheus"]["query"],
        )
        out[metric["name"]] = (query, metric["failureCondition"])
    return out


def argo_phase(result: list[float], failure: str) -> str:
    """What Argo Rollouts makes of a result with our conditions (`len(result) == 1 && result[0] > X`)."""
    threshold = float(failure.rsplit(">", 1)[1])
    if len(result) != 1:
        return "Inconclusive"
    return "Failed" if result[0] > threshold else "Successful"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize(
    ("shown", "phases"),
    [
        (
            WORSE,
            {"ttft-p99-ratio": "Failed", "ttft-slo-miss-increase": "Failed", "itl-p99-ratio": "Successful"},
        ),
        (SAME, dict.fromkeys(METRICS, "Successful")),
        (LITTLE, dict.fromkeys(METRICS, "Inconclusive")),
    ],
    ids=["worse", "equal", "too-little-traffic"],
)
def test_the_analysis_template_measures_each_rollout(
    prometheus: str, shown: Rollout, phases: dict[str, str]
) -> None:
    client = Prometheus(prometheus, END)
    found = {}
    for name, (query, failure) in argo_queries(shown).items():
        result = [value for _, value in client.vector(query)]
        found[name] = argo_phase(result, failure)
    print(shown.model, found)
    assert {name: found[name] for name in phases} == phases


def flagger_queries(shown: Rollout) -> dict[str, str]:
    """Each MetricTemplate's query as Flagger renders it for the Canary (Go template variables)."""
    values = {"namespace": "serving", "target": shown.target, "variables.model_name": shown.model}
    return {
        template["metadata"]["name"]: re.sub(
            r"\{\{ ([a-z_.]+) \}\}", lambda m: values[m.group(1)], template["spec"]["query"]
        )
        for template in flagger_templates(OPTIONS, CANARY)
    }


@pytest.mark.e2e
@pytest.mark.slow
def test_the_metric_templates_measure_each_rollout(prometheus: str) -> None:
    client = Prometheus(prometheus, END)
    limits = {
        f"servescope-{m['name']}": m["thresholdRange"]["max"]
        for m in flagger_analysis(OPTIONS, CANARY)["metrics"]
    }
    halted = {}
    for shown in (WORSE, SAME, LITTLE):
        for name, query in flagger_queries(shown).items():
            values = [value for _, value in client.vector(query)]
            # Flagger halts the advancement when the value is over the range's max, or when there is none.
            halted[(shown.model, name)] = (
                "no values" if not values else "over" if values[0] > limits[name] else "ok"
            )
            assert len(values) <= 1
    print(halted)
    assert halted[(WORSE.model, "servescope-ttft-p99-ratio")] == "over"
    assert halted[(WORSE.model, "servescope-ttft-slo-miss-increase")] == "over"
    assert {v for (model, _), v in halted.items() if model == SAME.model} == {"ok"}
    assert {v for (model, _), v in halted.items() if model == LITTLE.model} == {"no values"}


@pytest.mark.e2e
@pytest.mark.slow
def test_watch_replays_a_finished_rollout_step_by_step(prometheus: str, tmp_path: Path) -> None:
    """--watch from a past time analyses each step of the history at once: 2 minutes into the rollout the
    canary has too little traffic, then it is found worse, and the watch stops at that rollback."""
    watch = ("--watch", "--interval", "4m", "--count", "5")
    done = analyze_command(prometheus, WORSE, tmp_path, *watch, at=START + 120)
    verdicts_seen = re.findall(r": (ROLLBACK|PROMOTE|INCONCLUSIVE) \(", done.stdout)
    print(done.stdout)
    assert verdicts_seen[0] == "INCONCLUSIVE" and verdicts_seen[-1] == "ROLLBACK", verdicts_seen
    assert len(verdicts_seen) < 5 and done.returncode == 1


@pytest.mark.e2e
@pytest.mark.slow
def test_the_canary_alert_condition_names_the_worse_canary_only(prometheus: str) -> None:
    """ServescopeCanaryWorseThanStable's expression (PodMonitor topology) over the backfilled records at
    END: the slower canary, on TTFT, and none of the 101 equal or trickling canaries."""
    cfg = PODMONITOR
    found = Prometheus(prometheus, END).vector(worse(cfg))
    named = sorted((labels["model_name"], labels["revision"], labels["sli"]) for labels, _ in found)
    print(f"alert condition holds for: {sorted((*key.values(), value) for key, value in found)}")
    assert named == [
        (WORSE.model, WORSE.canary.revision, "ttft_p99_ratio"),
        (WORSE.model, WORSE.canary.revision, "ttft_slo_miss_increase"),
    ]
    assert {labels["stable_revision"] for labels, _ in found} == {WORSE.stable.revision}
