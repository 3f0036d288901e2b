"""Every read step of the shipped runbooks runs green against a simulated node's exporter."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from servescope.runbooks.actions import RunContext, dcgm
from servescope.runbooks.document import SHIPPED_RUNBOOKS, load_runbooks
from servescope.runbooks.runner import run
from tests.runbook.cli_peers import invoke, label_args
from tests.runbook.fakes import fake_http
from tests.support import Served

REAL_RUNBOOKS = SHIPPED_RUNBOOKS


def alert_labels(exporter: str) -> dict[str, str]:
    """The labels the simulated node's alerts would carry, read from its first engine's series."""
    metrics = httpx.get(f"{exporter}/metrics").text
    engine = next(line for line in metrics.splitlines() if line.startswith("servescope_engine_gpu_info{"))
    endpoint = engine.split('endpoint="')[1].split('"')[0]
    gpu = engine.split('gpu="')[1].split('"')[0]
    uuid = engine.split('uuid="')[1].split('"')[0]
    return {
        "instance": exporter.removeprefix("http://"),
        "job": "servescope",
        "hostname": "vm",
        "node": "vm",  # the Kubernetes node (kube-state-metrics' label) of the node-level tickets
        "gpu": gpu,
        "uuid": uuid,
        "xid": "79",
        "model_name": "deepseek-ai/DeepSeek-V3",
        "engine": "0",
        "endpoint": endpoint,
        "source": "nvml",
        "revision": "6d4cf56db9",
        "stable_revision": "7f8b9c0d1e",
        "sli": "ttft_p99_ratio",
        "reason": "series_limit",
        "target": "staging",  # the weekly capacity run's endpoint (its regression ticket)
        "label": "baseline",
        "prometheus": "servescope/servescope-agent",
        "prometheus_replica": "prom-agent-servescope-agent-0",
    }


@pytest.mark.e2e
@pytest.mark.skipif(not REAL_RUNBOOKS.is_dir(), reason="no runbooks/ folder in this checkout yet")
def test_every_read_step_of_the_real_runbooks_runs_green(
    simulated_exporter: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bound from labels as the simulated node's alerts would carry them; PromQL answered by a fake
    Prometheus, DCGM fields by the exporter (sampled 10 ms apart so `count: 5` takes no time)."""
    monkeypatch.setattr(dcgm, "SAMPLE_SECONDS", 0.01)
    exporter = simulated_exporter.base
    labels = alert_labels(exporter)
    found, errors = load_runbooks(REAL_RUNBOOKS)
    assert not errors, errors
    empty = {"status": "success", "data": {"resultType": "vector", "result": []}}
    failures = []
    with fake_http(lambda r: (200, empty)) as prometheus:
        ctx = RunContext(exporter_url=exporter, prometheus_url=prometheus.base)
        for runbook in found:
            for result in run(runbook, labels, ctx).results:
                if not result.ok:
                    failures.append(f"{runbook.alert} {result.step}: {result.output[:300]}")
    assert not failures, "\n".join(failures)
    result = invoke(
        "run", "ServescopeGpuSaturated", *label_args(labels), "--exporter-url", exporter, "--json"
    )
    assert result.exit_code in (0, 1), result.output  # promql steps fail here: no --prometheus-url
    assert json.loads(result.stdout)["alert"] == "ServescopeGpuSaturated"
