"""The weekly CronJob's command, run twice as the CronJob would, against a real Prometheus.

`deploy render --capacity-url` renders the CronJob; its container's arguments are run here (the staging
URL, the volume and Prometheus replaced by local ones): first against a mock engine (the baseline),
then against one 1.6 times slower (the candidate). Prometheus receives both results by remote write
and evaluates the bundle's ServescopeCapacityRegression rule (its `for` shortened: promtool covers the
real one): the regression series reads 1 and the alert fires, naming the target.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from servescope.bundle.alerts.rules_capacity_regression import capacity_regression
from servescope.core.config import AlertsConfig
from servescope.core.processes import Child, free_port
from servescope.deploy.options import DeployOptions
from servescope.deploy.render import documents
from servescope_sim.mock_process import mock_process
from servescope_sim.mock_server import MockConfig

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
STAGING = "http://vllm.staging.svc:8000"
# The first step at 12 req/s: below both engines' knees (about 34 and 21 req/s), so that each search
# brackets its knee. Started at 24, the slower candidate's first step sat at 94 % of its capacity and,
# on a busy machine, already missed: no knee, exit 4, though the regression was found.
QUICK = (
    "--quantile 0.9 --start-qps 12 --duration 4 --min-requests 0 --max-parts 3 --resolution 0.25 --warmup 1"
)
# Short steps; and a lag bound and no client ceiling this test does not measure (it checks the job's
# plumbing, not the client's accuracy, which tests/capacity/test_knee_http.py and test_client_bound.py
# do), so that a busy machine does not stop the search: beside two CPU-bound neighbours the calibration
# found a ceiling of 34 req/s and refused every step above 24 (exit 3, client_bound).
QUICK += " --prompt-tokens 16 --output-tokens 32 --max-lag 0.5 --no-calibrate"


def cron_job_args() -> list[str]:
    options = DeployOptions(capacity_url=STAGING, capacity_slo=["ttft:0.15"], capacity_args=QUICK)
    (job,) = [doc for doc in documents(options) if doc["kind"] == "CronJob"]
    assert job["spec"]["schedule"] == "0 3 * * 1" and job["spec"]["concurrencyPolicy"] == "Forbid"
    args: list[str] = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[str]:
    rules = {
        "groups": [capacity_regression(AlertsConfig(capacity_regression_for="2s")).render(AlertsConfig())]
    }
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    config = {"global": {"evaluation_interval": "1s"}, "rule_files": [str(tmp_path / "rules.yaml")]}
    (tmp_path / "prometheus.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    argv = [
        "prometheus",
        f"--config.file={tmp_path / 'prometheus.yaml'}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.enable-remote-write-receiver",
    ]
    child = Child("prometheus", argv, tmp_path / "prometheus.log")
    child.start()
    try:
        child.wait_ready(f"http://127.0.0.1:{port}/-/ready", 60)
        yield f"http://127.0.0.1:{port}"
    finally:
        child.stop()


def query(prometheus: str, expr: str) -> list[dict[str, Any]]:
    body = httpx.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def weekly(args: list[str], url: str, state: Path, prometheus: str) -> subprocess.CompletedProcess[str]:
    """The CronJob's command with the cluster's URLs and volume replaced by this machine's."""
    local = {STAGING: url, "/var/lib/servescope/capacity": str(state)}
    argv = [local.get(arg, arg) for arg in args]
    argv[argv.index("--remote-write-url") + 1] = f"{prometheus}/api/v1/write"
    return subprocess.run(
        [sys.executable, "-m", "servescope", *argv], capture_output=True, text=True, timeout=900, check=False
    )


def test_the_weekly_job_writes_its_result_and_a_slower_candidate_fires_the_alert(
    prometheus: str, tmp_path: Path
) -> None:
    args = cron_job_args()
    assert args[:2] == ["capacity", "weekly"] and "--remote-write-url" in args
    state = tmp_path / "state"
    with mock_process(MockConfig(slots=4, ttft_s=0.02, token_s=0.0025)) as baseline_engine:
        first = weekly(args, baseline_engine.base_url, state, prometheus)
    print(f"\nbaseline run: {first.stdout.strip().splitlines()[-1:]}")
    assert first.returncode == 0, first.stdout + first.stderr
    assert re.search(r"^ +\d+/\d+ s: \d+ sent, \d+ answered", first.stderr, re.M), "progress in a step"
    assert re.search(r"^ +[\d.]+ req/s seed \d+: (pass|miss)", first.stderr, re.M), "a line per step"
    assert (state / "baseline" / "capacity.json").is_file(), "the first measured run is the baseline"
    knee = query(prometheus, 'servescope_capacity_knee_requests_per_second{target="staging"}')
    # Written, and below what the engine can serve (41 req/s): how close it comes to the computed 33.9 is
    # test_knee_http.py's quiet claim. Here the machine is the suite's: its mock, starved of CPU, sends
    # tokens late and the knee reads low (16.2 req/s once in a quiet suite's first minutes).
    assert knee and 0 < float(knee[0]["value"][1]) < 41, knee
    assert not query(prometheus, "servescope_capacity_regression"), "nothing to compare the baseline with"
    with mock_process(MockConfig(slots=4, ttft_s=0.032, token_s=0.004)) as slower_engine:
        second = weekly(args, slower_engine.base_url, state, prometheus)
    print(second.stderr[-1500:])
    assert second.returncode == 0, second.stdout + second.stderr
    assert "REGRESSION" in second.stderr
    regression = query(prometheus, 'servescope_capacity_regression{target="staging",label="staging"}')
    assert [float(r["value"][1]) for r in regression] == [1.0]
    deadline = time.monotonic() + 60
    firing: list[dict[str, Any]] = []
    while not firing and time.monotonic() < deadline:
        firing = query(prometheus, 'ALERTS{alertname="ServescopeCapacityRegression",alertstate="firing"}')
        time.sleep(1)
    assert firing and firing[0]["metric"]["target"] == "staging", firing
    assert len(list((state / "runs").iterdir())) == 2
