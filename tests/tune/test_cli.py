"""`servescope tune run`: a simulated study end to end, a Kubernetes dry run, and refused input."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from servescope.kit.tune.cli import app

SPACE = """
engine: {num_gpu_blocks: 8192}
parameters:
  max_num_seqs: [32, 256]
  gpu_memory_utilization: [0.9, 0.98]
second_objective: gpus
peak_qps: 60
capacity: {slo: [ttft:0.5], duration_s: 10, warmup_s: 2, min_requests: 0, max_parts: 2}
"""


def _space(tmp_path: Path) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(SPACE)
    return path


def test_a_simulated_grid_study_writes_its_reports(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["run", str(_space(tmp_path)), "--strategy", "grid", "--remeasure", "1", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "tune.json").read_text())
    assert [t["state"] for t in data["trials"]].count("infeasible") == 2
    assert data["best"]["params"] == {"max_num_seqs": 256, "gpu_memory_utilization": 0.9}
    assert data["pareto_front"] == [data["best"]["number"]]  # more capacity, fewer GPUs: it dominates
    html = (out / "tune.html").read_text()
    assert "Search progress (grid)" in html and "Pareto front" in html and html.count("<svg") == 5
    assert "Best: max_num_seqs=256" in (out / "tune.md").read_text()


def test_a_kubernetes_dry_run_prints_one_patch_per_trial_and_measures_nothing(tmp_path: Path) -> None:
    args = ["run", str(_space(tmp_path)), "--strategy", "grid", "--launcher", "kubernetes"]
    args += ["--deployment", "vllm", "--namespace", "serving", "--base-args", "--model m"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.output.count("kubectl patch -n serving deployment/vllm") == 4
    assert '"--max-num-seqs", "32", "--gpu-memory-utilization", "0.98"' in result.output
    assert "Dry run" in result.output


def test_missing_launcher_options_are_named(tmp_path: Path) -> None:
    space = str(_space(tmp_path))
    command = CliRunner().invoke(app, ["run", space, "--launcher", "command", "--url", "http://127.0.0.1:9"])
    assert command.exit_code == 2 and "{flags}" in command.output
    no_url = CliRunner().invoke(app, ["run", space, "--launcher", "command"])
    assert no_url.exit_code == 2 and "--url" in no_url.output
    bad = CliRunner().invoke(app, ["run", space, "--strategy", "annealing"])
    assert bad.exit_code == 2 and "'annealing'" in bad.output
