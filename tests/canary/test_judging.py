"""The rules that make test results verdicts, the watch loop, the reports' escaping, and what the command
does with bad input and a Prometheus that cannot answer."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servescope.cli import app, register_subcommands
from servescope.core.config import AlertsConfig
from servescope.kit.canary.analysis import TESTS, Analysis, judge_all, overall
from servescope.kit.canary.cli import watch
from servescope.kit.canary.data import RevisionData
from servescope.kit.canary.histograms import Histogram
from servescope.kit.canary.html import page
from servescope.kit.canary.judge import Policy, Sli, SliResult
from servescope.kit.canary.prometheus import Prometheus, PrometheusError
from servescope.kit.canary.report import markdown, to_json
from servescope.kit.canary.settings import parse_time
from tests.runbook.fakes import fake_http

CFG = AlertsConfig()
POLICY = Policy(CFG.canary.alpha / TESTS, 600.0, CFG)
INF = math.inf


def data(revision: str, ttft: dict[float, float], **extra: Any) -> RevisionData:
    histograms = {"ttft": Histogram.from_buckets(ttft)}
    return RevisionData(revision, histograms, extra.get("finished", {}), extra.get("preemptions"))


def verdicts(canary: RevisionData, stable: RevisionData) -> dict[str, str]:
    return {result.name: result.verdict for result in judge_all(POLICY, canary, stable)}


STABLE = data("s", {0.1: 6000, 0.25: 8850, 0.5: 9000, INF: 9000}, finished={"stop": 9000}, preemptions=180)


def test_a_slower_canary_rolls_back_on_ttft_and_its_share_over_the_bound() -> None:
    slower = data("c", {0.1: 200, 0.25: 600, 0.5: 960, INF: 1000}, finished={"stop": 1000}, preemptions=20)
    found = verdicts(slower, STABLE)
    assert found["ttft"] == "rollback" and found["ttft_slo"] == "rollback"
    # What the canary does not export is not judged; what it does alike promotes.
    assert (
        found["itl"] == found["e2e"] == "not judged" and found["errors"] == found["preemptions"] == "promote"
    )
    assert overall(judge_all(POLICY, slower, STABLE))[0] == "rollback"


def test_a_significant_but_tiny_slowdown_promotes() -> None:
    """With millions of requests a shift of 0.3 % of them into the next bucket is significant, but a
    canary request is slower than a stable one with probability 0.502: under min_effect, promote."""
    stable = data("s", {0.1: 6_000_000, 0.25: 9_000_000, INF: 9_000_000})
    canary = data("c", {0.1: 663_000, 0.25: 1_000_000, INF: 1_000_000})
    (ttft, *_) = judge_all(POLICY, canary, stable)
    assert ttft.effect is not None and ttft.effect.p_value < POLICY.alpha_each
    assert ttft.verdict == "promote" and "significant but small" in ttft.reason


def test_too_few_requests_is_inconclusive_whatever_they_show() -> None:
    trickle = data("c", {0.1: 0, 0.25: 0, 0.5: 10, INF: 40}, finished={"abort": 40}, preemptions=40)
    results = judge_all(POLICY, trickle, STABLE)
    judged = [r for r in results if r.verdict != "not judged"]
    assert {r.verdict for r in judged} == {"inconclusive"}
    assert all("the canary served 40 requests in the window, fewer than 500" in r.reason for r in judged)
    assert overall(results) == ("inconclusive", f"not enough data for {', '.join(r.title for r in judged)}")


def test_more_preemptions_only_count_where_they_would_hurt() -> None:
    """5 preemptions in 1,000 canary requests against none in 9,000 is significant, but at 0.005 per
    request even all 10,000 requests of the window (over 600 s) would preempt 0.083/s: under
    preemptions_per_second (0.1/s), promote. 60 against 90 at the same volume rolls back."""
    stable = data("s", {0.5: 9000, INF: 9000}, preemptions=0)
    few = data("c", {0.5: 1000, INF: 1000}, preemptions=5)
    (found,) = [r for r in judge_all(POLICY, few, stable) if r.name == "preemptions"]
    assert found.effect is not None and found.effect.p_value < POLICY.alpha_each
    assert found.verdict == "promote" and "0.083/s" in found.reason
    busy = data("s", {0.5: 9000, INF: 9000}, preemptions=90)
    many = data("c", {0.5: 1000, INF: 1000}, preemptions=60)
    (found,) = [r for r in judge_all(POLICY, many, busy) if r.name == "preemptions"]
    assert (
        found.verdict == "rollback" and found.effect is not None and found.effect.size == pytest.approx(6.0)
    )


def result(verdict: str) -> SliResult:
    return SliResult(Sli("x", "X", "t", "w"), verdict, "")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        (["promote", "rollback", "inconclusive"], "rollback"),
        (["promote", "inconclusive", "not judged"], "inconclusive"),
        (["promote", "not judged"], "promote"),
        (["not judged"], "inconclusive"),
    ],
)
def test_overall(found: list[str], expected: str) -> None:
    assert overall(tuple(result(v) for v in found))[0] == expected


def analysis(verdict: str, canary: str = "c") -> Analysis:
    return Analysis("m", canary, "10m", 1e9, 0.05, 0.05 / TESTS, {"s": 90.0, canary: 10.0}, (), "s", verdict)  # type: ignore[arg-type]


def test_watch_analyses_past_times_at_once_waits_for_future_ones_and_stops_at_a_rollback() -> None:
    now = [1000.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    seen: list[float] = []

    def analyse(at: float) -> Analysis:
        seen.append(at)
        return analysis("rollback" if at >= 1100 else "inconclusive")

    last = watch(analyse, 900.0, 60.0, 0, clock=lambda: now[0], sleep=sleep)
    assert seen == [900.0, 960.0, 1020.0, 1080.0, 1140.0] and slept == [20.0, 60.0, 60.0]
    assert last.verdict == "rollback"
    seen.clear()
    assert watch(analyse, 0.0, 60.0, 3, clock=lambda: now[0], sleep=sleep).verdict == "inconclusive"
    assert seen == [0.0, 60.0, 120.0]


def test_reports_escape_names_and_write_no_nan() -> None:
    hostile = '<script>alert("x")</script>'
    found = analysis("promote", canary=hostile)
    html = page(found)
    assert "<script" not in html and "&lt;script&gt;" in html
    assert hostile in markdown(found)
    nan = Analysis("m", "c", "10m", 1e9, 0.05, 0.007, {"c": math.nan}, ())
    assert "NaN" not in json.dumps(to_json(nan)) and json.loads(json.dumps(to_json(nan)))["traffic"] == {
        "c": None
    }


def test_times_are_unix_seconds_or_rfc3339() -> None:
    assert parse_time("1700000000") == 1700000000.0
    assert parse_time("2023-11-14T22:13:20Z") == 1700000000.0
    for bad in ("yesterday", "-5", "nan"):
        with pytest.raises(ValueError, match=repr(bad)):
            parse_time(bad)


def test_a_prometheus_that_cannot_answer_is_named() -> None:
    with (
        fake_http(
            lambda request: (200, {"status": "error", "errorType": "bad_data", "error": "parse error"})
        ) as bad,
        pytest.raises(PrometheusError, match=r"refused .* parse error"),
    ):
        Prometheus(bad.base, 1e9).vector("up")
    with (
        fake_http(
            lambda request: (200, {"status": "success", "data": {"resultType": "matrix", "result": []}})
        ) as odd,
        pytest.raises(PrometheusError, match="expected a vector"),
    ):
        Prometheus(odd.base, 1e9).vector("up")
    huge = {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {"x": "y" * 5_000_000}}]},
    }
    with fake_http(lambda request: (200, huge)) as flood, pytest.raises(PrometheusError, match="larger than"):
        Prometheus(flood.base, 1e9).vector("up")
    with fake_http(
        lambda request: (200, {"status": "success", "data": {"resultType": "vector", "result": []}})
    ) as ok:
        assert Prometheus(ok.base, 1234.5).vector("up") == []
        assert ok.requests[0].query == {"query": ["up"], "time": ["1234.500"]}


def analyze_cli(*args: str) -> Any:
    register_subcommands("canary")
    return CliRunner().invoke(app, ["canary", "analyze", *args])


def test_the_command_refuses_bad_input_and_names_an_unreachable_prometheus(tmp_path: Path) -> None:
    result = analyze_cli("--canary", "c")
    assert result.exit_code == 3 and "--model" in result.stderr
    result = analyze_cli("--model", "m", "--canary", "c", "--window", "ten minutes")
    assert result.exit_code == 3 and "--window" in result.stderr
    result = analyze_cli("--model", "m", "--canary", "c", "--prometheus", "http://127.0.0.1:9", "--at", "1e9")
    assert result.exit_code == 3 and "cannot reach Prometheus at http://127.0.0.1:9" in result.stderr
    config = tmp_path / "alerts.yaml"
    config.write_text("canary: {min_requests: 0}\n")
    result = analyze_cli("--model", "m", "--canary", "c", "--config", str(config))
    assert result.exit_code == 3 and "min_requests" in result.stderr


def test_a_canary_alone_is_inconclusive_with_its_reason(tmp_path: Path) -> None:
    """A model whose only revision is the canary has nothing to compare with."""

    def answer(request: Any) -> tuple[int, Any]:
        query = request.query["query"][0]
        found = (
            [{"metric": {"revision": "c"}, "value": [1e9, "1200"]}]
            if query.startswith("sum by (revision)")
            else []
        )
        return 200, {"status": "success", "data": {"resultType": "vector", "result": found}}

    with fake_http(answer) as prometheus:
        out = tmp_path / "a.json"
        result = analyze_cli(
            "--prometheus", prometheus.base, "--model", "m", "--canary", "c", "--json", str(out)
        )
    assert result.exit_code == 2, result.output
    assert "nothing to compare with" in json.loads(out.read_text())["reason"]
