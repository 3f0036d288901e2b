"""`servescope capacity run --simulate` and `capacity compare`: reports, JSON round trip, exit codes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servescope.kit.capacity.cli import app
from servescope.kit.capacity.result import CapacityRun, load, save, to_json
from servescope.kit.capacity.search import Knee, SearchPlan
from servescope.kit.capacity.sizing import CrossCheck
from servescope.kit.capacity.steps import Slo

QUICK = ["run", "--simulate", "--duration", "10", "--repeats", "2", "--warmup", "2"]


def _run(tmp_path: Path, name: str, *extra: str) -> Path:
    out = tmp_path / name
    result = CliRunner().invoke(app, [*QUICK, "--label", name, "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    return out / "capacity.json"


def test_run_writes_reports_and_the_json_reads_back_the_same(tmp_path: Path) -> None:
    path = _run(tmp_path, "base", "--peak-qps", "100", "--slo", "ttft:0.5", "--slo", "e2e:20")
    data = json.loads(path.read_text())
    run = load(path)
    assert json.loads(json.dumps(to_json(run))) == data
    assert 8 < run.knee.lower <= run.knee.estimate <= run.knee.upper < 25
    assert run.provision is not None and run.provision.replicas >= 100 / (0.8 * run.knee.lower)
    assert [slo.metric for slo in run.plan.slos] == ["ttft", "e2e"]
    html = (path.parent / "capacity.html").read_text()
    assert html.count("<svg") == 3 and "SLO 500 ms" in html and "<script" not in html
    assert "| base |" in (path.parent / "capacity.md").read_text()


def test_a_cross_check_reads_back_whole(tmp_path: Path) -> None:
    checks = [
        CrossCheck(4.0, 0.21, 0.1, 0.25, True, path_s=0.037),
        CrossCheck(16.0, math.inf, 2.5, math.inf, False, path_s=0.052),
    ]
    run = CapacityRun("base", SearchPlan((Slo("ttft", 0.5),)), Knee(8.0, 6.0, 10.0, []), None, checks)
    save(run, tmp_path / "capacity.json")
    assert load(tmp_path / "capacity.json").cross_checks == checks


@pytest.mark.slow
def test_compare_flags_a_real_regression_and_not_a_reseeded_baseline(tmp_path: Path) -> None:
    base = _run(tmp_path, "base")
    reseeded = _run(tmp_path, "again", "--seed", "7")
    worse = _run(tmp_path, "smaller-batch", "--set", "max_num_seqs=64")
    same = CliRunner().invoke(app, ["compare", str(base), str(reseeded), "--resamples", "200"])
    assert same.exit_code == 0, same.output
    assert "no significant regression" in same.output
    regressed = CliRunner().invoke(app, ["compare", str(base), str(worse), "--resamples", "200"])
    assert regressed.exit_code == 1, regressed.output
    assert "REGRESSION" in regressed.output


def test_an_unreachable_url_and_bad_input_fail_clearly(tmp_path: Path) -> None:
    both = CliRunner().invoke(app, ["run", "--simulate", "--url", "http://127.0.0.1:9"])
    assert both.exit_code == 2 and "exactly one of --simulate and --url" in both.output
    http = CliRunner().invoke(app, ["run", "--url", "http://127.0.0.1:9"])
    assert http.exit_code == 2 and "http://127.0.0.1:9/v1/models: cannot read a model name" in http.output
    bad_slo = CliRunner().invoke(app, ["run", "--simulate", "--slo", "ttft"])
    assert bad_slo.exit_code == 2 and "'ttft'" in bad_slo.output
    bad_flag = CliRunner().invoke(app, ["run", "--simulate", "--set", "gpu_memory_utilization=0.99"])
    assert bad_flag.exit_code == 2 and "gpu_memory_utilization 0.99" in bad_flag.output
    missing = CliRunner().invoke(app, ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert missing.exit_code == 2 and "a.json" in missing.output
