"""`servescope capacity run --simulate` and `capacity compare`: reports, JSON round trip, exit codes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servescope.kit.capacity.cli import app
from servescope.kit.capacity.result import CapacityRun, Provenance, load, save, to_json
from servescope.kit.capacity.search import Knee, SearchPlan
from servescope.kit.capacity.sizing import CrossCheck
from servescope.kit.capacity.steps import Slo

QUICK = ["run", "--simulate", "--duration", "10", "--warmup", "2", "--min-requests", "200"]


def _run(tmp_path: Path, name: str, *extra: str, code: int | None = 0) -> Path:
    out = tmp_path / name
    result = CliRunner().invoke(app, [*QUICK, "--label", name, "--out", str(out), *extra])
    assert code is None or result.exit_code == code, result.output
    return out / "capacity.json"


def test_run_writes_reports_whose_first_line_is_the_status_and_the_json_reads_back(tmp_path: Path) -> None:
    path = _run(tmp_path, "base", "--peak-qps", "100", "--slo", "ttft:0.5", "--slo", "e2e:20")
    data = json.loads(path.read_text())
    run = load(path)
    assert json.loads(json.dumps(to_json(run))) == data
    assert data["status"] == "measured" and data["schema"] == 2
    assert 0 <= run.knee.lower <= (run.knee.estimate or 0) <= run.knee.upper < 25
    # Sized from the interval's lower end, when a step decided one (sizing itself: test_steps_and_sizing).
    assert (run.provision is None) == (run.knee.lower == 0)
    assert [slo.metric for slo in run.plan.slos] == ["ttft", "e2e"]
    provenance = data["provenance"]
    assert provenance["runner"] == "simulated" and provenance["started"] and provenance["servescope_version"]
    report = (path.parent / "capacity.md").read_text()
    assert report.splitlines()[0].startswith("measured: knee ") and "95% interval" in report.splitlines()[0]
    assert "| base |" in report and "Steps of base" in report
    html = (path.parent / "capacity.html").read_text()
    assert html.count("<svg") == 3 and "SLO 500 ms" in html and "<script" not in html


def test_a_cross_check_and_a_run_without_a_knee_read_back_whole(tmp_path: Path) -> None:
    checks = [
        CrossCheck(4.0, 0.21, 0.1, 0.25, True, path_s=0.037),
        CrossCheck(16.0, math.inf, 2.5, math.inf, False, path_s=0.052),
    ]
    knee = Knee("client_bound", None, 4.0, math.inf, [], message="client_bound above 4 req/s: lag")
    knee.client_bound_above = 4.0
    run = CapacityRun(
        "base", SearchPlan((Slo("ttft", 0.5),)), knee, None, checks, {}, Provenance("u", "http")
    )
    save(run, tmp_path / "capacity.json")
    again = load(tmp_path / "capacity.json")
    assert again.cross_checks == checks and again.knee.status == "client_bound"
    assert again.knee.estimate is None and again.knee.client_bound_above == 4.0
    assert again.status_line == "client_bound above 4 req/s: lag"


def test_a_first_step_that_already_misses_stops_and_still_writes_the_report(tmp_path: Path) -> None:
    path = _run(tmp_path, "slow-start", "--start-qps", "40", code=4)
    data = json.loads(path.read_text())
    assert data["status"] == "not_reached" and data["knee"]["estimate"] is None
    assert "the first step (40 req/s) already misses" in data["message"]
    assert len(data["steps"]) <= 2, "the search stopped at its first step instead of halving to zero"
    assert (path.parent / "capacity.md").read_text().startswith("not_reached: the first step (40 req/s)")


@pytest.mark.slow
def test_compare_flags_a_real_regression_and_not_a_reseeded_baseline(tmp_path: Path) -> None:
    base = _run(tmp_path, "base", "--probe-share", "0.9")
    assert load(base).plan.probe_qps is not None
    reseeded = _run(tmp_path, "again", "--seed", "7", "--probe-from", str(base))
    worse = _run(tmp_path, "smaller-batch", "--set", "max_num_seqs=64", "--probe-from", str(base))
    same = CliRunner().invoke(app, ["compare", str(base), str(reseeded)])
    assert same.exit_code == 0, same.output
    assert same.output.startswith("no regression")
    regressed = CliRunner().invoke(app, ["compare", str(base), str(worse)])
    assert regressed.exit_code == 1, regressed.output
    assert regressed.output.startswith("REGRESSION")


def test_compare_refuses_runs_that_measured_different_things_in_one_line(tmp_path: Path) -> None:
    base = load(_run(tmp_path, "base", "--max-qps", "4", code=None))
    base.knee.status = "measured"
    other = load(_run(tmp_path, "e2e", "--max-qps", "4", "--slo", "e2e:20", code=None))
    save(base, tmp_path / "a.json")
    save(other, tmp_path / "b.json")
    refused = CliRunner().invoke(app, ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert refused.exit_code == 2 and "the SLOs differ" in refused.output
    assert len([line for line in refused.output.splitlines() if line.strip()]) == 1
    other.plan = base.plan
    other.provenance = Provenance("http://x", "http", "m", "0.32", {"kind": "random"})
    save(other, tmp_path / "b.json")
    refused = CliRunner().invoke(app, ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert refused.exit_code == 2 and "the workloads differ" in refused.output


def test_an_unreachable_url_and_bad_input_fail_clearly(tmp_path: Path) -> None:
    both = CliRunner().invoke(app, ["run", "--simulate", "--url", "http://127.0.0.1:9"])
    assert both.exit_code == 2 and "exactly one of --simulate and --url" in both.output
    http = CliRunner().invoke(app, ["run", "--url", "http://127.0.0.1:9", "--no-calibrate"])
    assert http.exit_code == 2 and "http://127.0.0.1:9/v1/models: cannot read a model name" in http.output
    bad_slo = CliRunner().invoke(app, ["run", "--simulate", "--slo", "ttft"])
    assert bad_slo.exit_code == 2 and "'ttft'" in bad_slo.output
    bad_flag = CliRunner().invoke(app, ["run", "--simulate", "--set", "gpu_memory_utilization=0.99"])
    assert bad_flag.exit_code == 2 and "gpu_memory_utilization 0.99" in bad_flag.output
    missing = CliRunner().invoke(app, ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert missing.exit_code == 2 and "a.json" in missing.output
