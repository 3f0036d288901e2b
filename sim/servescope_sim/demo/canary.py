"""What the demo adds for a scenario played on a simulated cluster (`canary`): the port of the simulated
API server, the runbook service pointed at it, and what to run once the canary alert fires.

The exporter learns each engine pod's revision from that API server (as on a cluster node); the runbook
service's `rollback` step reads the Deployment and its ReplicaSets there, and its dry run prints the API
call it would send (the simulated cluster takes no writes).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from servescope_sim.cluster import CANARY_REVISION, NAMESPACE, STABLE_REVISION
from servescope_sim.engines import MODEL_NAME, gpu_groups
from servescope_sim.registry import make_scenario

ALERT = "ServescopeCanaryWorseThanStable"


def needs_cluster(scenario: str, gpus: int, engines: int) -> bool:
    return make_scenario(scenario, pace="demo", layout=gpu_groups(gpus, engines)).needs_cluster


def api_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def exporter_args(port: int) -> list[str]:
    return [f"--cluster-api-listen=127.0.0.1:{port}"] if port else []


def runbook_args(port: int) -> list[str]:
    """The runbook service reaches the simulated API server, and its rollback step looks for the model's
    workload in the serving namespace."""
    return [f"--kube-api-url={api_url(port)}", f"--serving-namespace={NAMESPACE}"] if port else []


def analyze_argv(prometheus: str, alerts: Path) -> list[str]:
    return [
        "servescope", "canary", "analyze", "--prometheus", prometheus, "--config", str(alerts),
        "--model", MODEL_NAME, "--canary", CANARY_REVISION,
    ]  # fmt: skip


def rollback_argv(kube_api: str) -> list[str]:
    labels = {"model_name": MODEL_NAME, "revision": CANARY_REVISION, "stable_revision": STABLE_REVISION}
    flags = [arg for name, value in labels.items() for arg in ("--label", f"{name}={value}")]
    return [
        "servescope", "runbook", "run", ALERT, "--step", "rollback", "--kube-api-url", kube_api,
        "--serving-namespace", NAMESPACE, *flags,
    ]  # fmt: skip


def guide(port: int, prometheus: str | None, alerts: Path) -> list[str]:
    """What to run once the canary alert fires (nothing for a scenario without a cluster)."""
    if not port:
        return []
    lines = [f"The simulated cluster's API server: {api_url(port)} (namespace {NAMESPACE}, read-only)."]
    lines.append(f"Once {ALERT} fires, its incident shows both revisions side by side; then:")
    if prometheus:
        lines.append("  " + shlex.join(analyze_argv(prometheus, alerts)) + "   # says rollback, exit 1")
    lines.append("  " + shlex.join(rollback_argv(api_url(port))) + "   # dry run: prints the API call")
    return lines
