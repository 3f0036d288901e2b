"""Tuning that tells the truth: every trial in every format with its reason, ties named as ties, pruned
trials re-measurable, a random search beside when asked, and vLLM V1's flag semantics.

The engines are virtual FIFO queues (tests/capacity/fifo_truth.py) with a `slots` flag: a trial's knee
grows with its slots, and two configurations of the same slots measure the same engine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servescope.kit.load.client import RequestSpec, body_of
from servescope.kit.load.records import StepRunner
from servescope.kit.load.schedule import Shape
from servescope.kit.tune.cli import app, make_launcher, write_reports
from servescope.kit.tune.launchers import LaunchError
from servescope.kit.tune.settings import TuneRunSettings
from servescope.kit.tune.space import Space, Value, parse_space
from servescope.kit.tune.strategies import Study, candidates, run_study
from servescope.kit.tune.trials import Trial
from tests.capacity.fifo_truth import FifoEngine, VirtualFifoRunner

CAPACITY = {"slo": ["ttft:0.3"], "quantile": 0.9, "duration_s": 10, "min_requests": 0, "max_parts": 2}


@dataclass
class FifoLauncher:
    """Starts a virtual FIFO engine of `slots` slots; `slots: 0` fails to start, with a log line."""

    started: list[dict[str, Value]] = field(default_factory=list)

    def start(self, params: Mapping[str, Value]) -> StepRunner:
        self.started.append(dict(params))
        slots = params.get("slots", 4)
        if slots == 0:
            raise LaunchError("the engine exited with status 1; its log ends with:\nValueError: no slots")
        assert isinstance(slots, int)
        return VirtualFifoRunner(FifoEngine(slots=slots), warmup_s=2.0)

    def stop(self) -> None:
        """Nothing keeps running between trials."""


def space(parameters: dict[str, object], capacity: dict[str, object] = CAPACITY, **extra: object) -> Space:
    return parse_space({"parameters": parameters, "capacity": {**capacity, "start_qps": 4}, **extra})


def test_every_format_lists_every_trial_with_its_reason(tmp_path: Path) -> None:
    study = run_study(space({"slots": [8, 0, 2]}), FifoLauncher(), "grid", prune=True, remeasure=1)
    states = [t.state for t in study.trials]
    assert states == ["complete", "infeasible", "pruned"], [t.reason for t in study.trials]
    assert "ValueError: no slots" in (study.trials[1].reason or "")
    assert "pruned by its step at" in (study.trials[2].reason or "")
    write_reports(study, tmp_path)
    html, md = (tmp_path / "tune.html").read_text(), (tmp_path / "tune.md").read_text()
    data = json.loads((tmp_path / "tune.json").read_text())
    assert "<h2>Trials</h2>" in html and html.count("<tr>") >= 4
    for text in (html, md):
        assert "infeasible" in text and "ValueError: no slots" in text and "pruned by its step at" in text
    assert [t["state"] for t in data["trials"]] == states and "no slots" in data["trials"][1]["reason"]


def test_configurations_the_measurement_cannot_separate_are_named_as_ties(tmp_path: Path) -> None:
    # Two names for the same 4-slot engine, and a 2-slot one far below them.
    powered = {**CAPACITY, "duration_s": 20, "max_parts": 4}  # enough to decide both ends of each interval
    study = run_study(
        space({"slots": [4, 2], "label": ["a", "b"]}, powered), FifoLauncher(), "grid", prune=False
    )
    tied = study.tied()
    assert {t.params["slots"] for t in tied} == {4} and len(tied) == 2, [
        (t.label, t.knee) for t in study.trials
    ]
    write_reports(study, tmp_path)
    assert "Tied with it:" in (tmp_path / "tune.md").read_text()
    assert json.loads((tmp_path / "tune.json").read_text())["tied"] == [tied[1].number]


def test_a_pruned_trial_that_may_tie_the_best_is_measured_again() -> None:
    study = Study("grid", space({"slots": [4]}))
    study.trials = [
        Trial(0, {"slots": 4}, "complete", objective=16.0, knee=(16.0, 15.0, 17.0)),
        Trial(1, {"slots": 5}, "pruned", knee=(0.0, 14.0, 16.5)),  # pruned at 16.5: above 15.0
        Trial(2, {"slots": 1}, "pruned", knee=(0.0, 3.0, 4.0)),  # pruned far below: cannot tie
    ]
    assert [t.number for t in candidates(study)] == [1, 0] or [t.number for t in candidates(study)] == [0, 1]
    assert 2 not in [t.number for t in candidates(study)]


def test_a_bayesian_study_reports_a_random_one_beside_when_asked(tmp_path: Path) -> None:
    study = run_study(
        space({"slots": [1, 2, 3, 4, 5, 6]}), FifoLauncher(), "bayes", budget=3, compare_random=True
    )
    assert len(study.trials) == 3 and len(study.random_trials) == 3
    write_reports(study, tmp_path)
    assert "random search with the same budget: best" in (tmp_path / "tune.md").read_text()
    assert len(json.loads((tmp_path / "tune.json").read_text())["random"]) == 3
    assert "random search, best so far" in (tmp_path / "tune.html").read_text()


def test_a_space_that_follows_v0_semantics_is_refused_naming_v1(tmp_path: Path) -> None:
    conditional = {
        "enable_chunked_prefill": [False, True],
        "max_num_batched_tokens": {"values": [2048, 8192], "when": {"enable_chunked_prefill": True}},
    }
    with pytest.raises(ValueError, match="whether or not chunked prefill is on"):
        run_study(space(conditional), FifoLauncher(), "grid")
    with pytest.raises(ValueError, match="not a vLLM V1 flag"):
        run_study(space({"num_scheduler_steps": [1, 8]}), FifoLauncher(), "grid")
    path = tmp_path / "space.yaml"
    path.write_text(json.dumps({"parameters": conditional}))
    refused = CliRunner().invoke(app, ["run", str(path), "--strategy", "grid"])
    assert refused.exit_code == 2 and "vLLM V1" in refused.output


def test_a_configuration_v1_cannot_start_is_infeasible_without_an_engine_start() -> None:
    launcher = FifoLauncher()
    fixed = {"max_model_len": 4096}
    params = {"enable_chunked_prefill": [False], "max_num_batched_tokens": [2048, 8192], "slots": [4]}
    study = run_study(space(params, engine=fixed), launcher, "grid", prune=False)
    assert study.trials[0].state == "infeasible" and "below max_model_len 4096" in (
        study.trials[0].reason or ""
    )
    assert [p["max_num_batched_tokens"] for p in launcher.started] == [8192]


def test_requests_carry_priority_exactly_when_the_engine_schedules_by_it() -> None:
    settings = TuneRunSettings(
        launcher="command",
        url="http://127.0.0.1:9",
        command="vllm serve m {flags}",
        health_url="http://x/health",
        calibrate=False,
    )
    launcher = make_launcher(space({"scheduling_policy": ["fcfs", "priority"]}), settings)
    runner = launcher.runner  # type: ignore[attr-defined]
    assert (
        runner({"scheduling_policy": "priority"}).priority
        and not runner({"scheduling_policy": "fcfs"}).priority
    )
    with_priority = body_of(RequestSpec("http://e", "m", priority=True), Shape(12, 4, "twelve words"))
    assert with_priority["priority"] == 12  # shorter prompts first
    assert "priority" not in body_of(RequestSpec("http://e", "m"), Shape(12, 4))
