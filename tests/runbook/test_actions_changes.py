"""Change actions (Alertmanager silences, engine settings) print what they would do and act only when
executed; the Kubernetes ones are in test_kube_actions.py."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from pydantic import ValidationError

from servescope.runbooks.actions import (
    ACTIONS,
    RunContext,
)
from servescope.runbooks.actions.changes import SilenceParams
from tests.runbook.fakes import (
    Recorded,
    fake_http,
    run,
)

# --- change actions: dry run unless executed (cordon, drain, scale: tests/runbook/test_kube_actions.py) ---


def test_lower_max_num_seqs_prints_the_patch_and_never_runs_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("lower_max_num_seqs started a process")

    monkeypatch.setattr(subprocess, "run", forbidden)
    monkeypatch.setattr(subprocess, "Popen", forbidden)
    for execute in (False, True):
        result = run(
            "lower_max_num_seqs",
            RunContext(execute=execute, exporter_url="http://127.0.0.1:1"),
            model_name="deepseek-ai/DeepSeek-V3",
            endpoint="http://10.0.0.5:8000/metrics",
            value=96,
        )
        assert result.ok and result.dry_run and result.command is None
        assert result.data["vllm_args"] == ["--max-num-seqs", "96"]
        assert "--max-num-seqs 96" in result.output and "Rolling-restart plan" in result.output
        assert ("Nothing was executed" in result.output) == execute
    with pytest.raises(ValidationError, match="give endpoint or model_name"):
        ACTIONS["lower_max_num_seqs"].params.model_validate({"value": 8})
    with pytest.raises(ValidationError):
        ACTIONS["lower_max_num_seqs"].params.model_validate({"model_name": "m", "value": 4097})


@pytest.mark.e2e
def test_create_silence_posts_to_alertmanager_only_when_executed() -> None:
    params = {
        "alertname": "ServescopeGpuSaturated",
        "matchers": {"instance": "10.0.0.5:9108", "gpu": "0"},
        "duration": "2h",
        "comment": "lowering the batch size, see the runbook",
    }

    def reply(request: Recorded) -> tuple[int, Any]:
        return 200, {"silenceID": "b3f9c1de-0000-4000-8000-000000000001"}

    with fake_http(reply) as alertmanager:
        dry = run("create_silence", RunContext(alertmanager_url=alertmanager.base), **params)
        assert dry.ok and dry.dry_run and not alertmanager.requests
        assert json.loads(dry.output.split("\n", 1)[1].rsplit("\n", 1)[0]) == dry.data["silence"]
        done = run("create_silence", RunContext(alertmanager_url=alertmanager.base, execute=True), **params)
        assert done.ok and done.data["silence_id"] == "b3f9c1de-0000-4000-8000-000000000001"
        (request,) = alertmanager.requests
        assert (request.method, request.path) == ("POST", "/api/v2/silences")
        body = json.loads(request.body)
        assert body["matchers"] == [
            {"name": "alertname", "value": "ServescopeGpuSaturated", "isRegex": False, "isEqual": True},
            {"name": "gpu", "value": "0", "isRegex": False, "isEqual": True},
            {"name": "instance", "value": "10.0.0.5:9108", "isRegex": False, "isEqual": True},
        ]
        assert body["comment"] == params["comment"] and body["createdBy"] == "servescope runbook"
        starts = body["startsAt"]
        assert starts.endswith("Z") and body["endsAt"] > starts
    no_alertmanager = run("create_silence", RunContext(execute=True), **params)
    assert not no_alertmanager.ok and "pass --alertmanager-url" in no_alertmanager.output
    with pytest.raises(ValidationError, match="7d at most"):
        SilenceParams.model_validate({**params, "duration": "8d"})
    with pytest.raises(ValidationError, match="not as a matcher"):
        SilenceParams.model_validate({**params, "matchers": {"alertname": "x"}})
