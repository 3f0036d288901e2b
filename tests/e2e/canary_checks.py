"""What the canary demo stack must show (tests/e2e/test_demo_stack.py): engine 3 of 4 becomes revision
84b5c7f9d6 (prefill 4x slower: about 2x the P99 TTFT of the stable 6d4cf56db9, with a quarter of the
requests); the canary ticket fires naming both revisions, nothing else fires, the incident's read steps
show both revisions side by side, `canary analyze` says rollback (exit 1) with the demo's own config, and
the rollback step's dry run prints the API call that puts the Deployment back on the stable template."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from servescope_sim.cluster import CANARY_REVISION, STABLE_REVISION
from servescope_sim.demo import canary
from tests.e2e.demo_stacks import Stack
from tests.support import wait_for

ALERT = "ServescopeCanaryWorseThanStable"
EXPECTED = {"ServescopeWatchdog", ALERT}


def _ttft_tickets(stack: Stack) -> list[dict[str, Any]]:
    return [a for a in stack.alerts(ALERT) if a["labels"].get("sli") == "ttft_p99_ratio"]


def ticket(stack: Stack, timeout: float) -> list[dict[str, Any]]:
    """The canary's TTFT ticket once firing, checked: both revisions named, the ratio over 1.5."""
    alerts = wait_for(f"{ALERT} firing on the canary's TTFT", lambda: _ttft_tickets(stack), timeout)
    (alert,) = alerts
    labels = alert["labels"]
    assert (labels["revision"], labels["stable_revision"]) == (CANARY_REVISION, STABLE_REVISION), labels
    assert labels["model_name"] == "deepseek-ai/DeepSeek-V3" and labels["severity"] == "warning"
    assert 1.5 < float(alert["value"]) < 3.5, alert["value"]  # ~2x, through the histogram's buckets
    return alerts


def nothing_else_fired(stack: Stack) -> None:
    """A canary worse than stable is a ticket, not a page: the model's SLO alerts stay silent."""
    window = int(time.time() - stack.started) + 5
    fired = stack.query(f'count_over_time(ALERTS{{alertstate="firing"}}[{window}s])')
    assert {series["metric"]["alertname"] for series in fired} <= EXPECTED, fired


def both_revisions_shown(incident: dict[str, Any]) -> None:
    step = next(s for s in incident["steps"] if s["step_id"] == "both-revisions")
    assert step["ok"], step["output"]
    assert CANARY_REVISION in step["output"] and STABLE_REVISION in step["output"], step["output"]


def analysed(stack: Stack, tmp_path: Path) -> dict[str, Any]:
    """`servescope canary analyze`, as the demo prints it, with a JSON report: exit 1, rollback."""
    report = tmp_path / "canary.json"
    argv = canary.analyze_argv(stack.urls["prometheus"], stack.state / "alerts.yaml")
    done = subprocess.run(
        [sys.executable, "-m", *argv, "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    found: dict[str, Any] = json.loads(report.read_text())
    return found


def rolled_back_dry(stack: Stack) -> str:
    """The rollback step's dry run against the demo's simulated cluster, as the demo prints it."""
    argv = canary.rollback_argv(stack.urls["kube_api"])
    done = subprocess.run(
        [sys.executable, "-m", *argv], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
