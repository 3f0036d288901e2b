"""`servescope load` as a user runs it: a step against the mock, its live metrics, its exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from servescope.core.processes import free_port
from servescope.kit.load.metrics import metric_names
from servescope_sim.mock_process import mock_process
from servescope_sim.mock_server import MockConfig
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e
SERVESCOPE = [sys.executable, "-m", "servescope", "load"]


@pytest.fixture(scope="module")
def mock() -> Iterator[str]:
    with mock_process(MockConfig(slots=4, ttft_s=0.02, token_s=0.005)) as served:
        yield served.base_url


def run_with_metrics(mock: str, tmp_path: Path) -> tuple[int, str, str, Path]:
    """One `load run` with its own metrics port: its exit code, output, a metrics page and its JSON."""
    port, out = free_port(), tmp_path / f"step-{free_port()}.json"
    argv = [*SERVESCOPE, "run", "--url", mock, "--rate", "10", "--duration", "4", "--prompt-tokens", "8"]
    argv += ["--output-tokens", "10", "--metrics-port", str(port), "--json", str(out), "--max-lag", "0.25"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as run:
        try:

            def exposed() -> str | None:
                page = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
                return page if "servescope_load_ttft_seconds_count 0.0" not in page else None

            page = wait_for("the run's own metrics with a TTFT observed", exposed, timeout=15, every=0.2)
            output, _ = run.communicate(timeout=30)
        finally:
            run.kill()
    return run.returncode, output, page, out


def test_a_run_exposes_its_metrics_and_writes_its_summary(mock: str, tmp_path: Path) -> None:
    # Valid or not, a run reports itself: its metrics while it runs, its summary, an exit status that
    # says which. A machine busy enough to make the client send late makes it rightly invalid (exit 3);
    # the verdict's rules are tested on fixed inputs (test_schedule_and_validity.py).
    code, output, page, out = run_with_metrics(mock, tmp_path)
    assert code in (0, 3), output
    assert 'servescope_load_offered_rate{mode="open"} 10.0' in page
    names = {line.split("{")[0].split(" ")[0] for line in page.splitlines() if not line.startswith("#")}
    assert {"servescope_load_in_flight", "servescope_load_ttft_seconds_bucket"} <= names <= metric_names()
    summary = json.loads(out.read_text())
    assert summary["mode"] == "open" and summary["succeeded"] == summary["requests"] > 0
    assert summary["valid"] == (code == 0), (code, summary)
    assert ("open loop, 10 req/s offered: VALID" in output) == (code == 0) and "open loop" in output


def load(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SERVESCOPE, *args], capture_output=True, text=True, check=False, timeout=60)


def test_closed_loop_is_labelled(mock: str) -> None:
    closed = load("run", "--url", mock, "--mode", "closed", "--concurrency", "2", "--duration", "1")
    assert closed.returncode == 0, closed.stderr
    assert closed.stdout.startswith("CLOSED LOOP, 2 concurrent clients")


def test_each_side_at_fault_has_its_exit_status(mock: str) -> None:
    common = ["run", "--url", mock, "--duration", "2", "--output-tokens", "10"]
    # Four in flight at most against 200 req/s: the client holds every request back, the engine idles.
    capped = load(*common, "--rate", "200", "--max-in-flight", "4")
    assert capped.returncode == 3, capped.stdout + capped.stderr
    assert "CLIENT_BOUND (not a result: the client could not drive it)" in capped.stdout
    assert "remedy:" in capped.stdout
    # 200 req/s into 4 slots of ~65 ms (about 60 req/s): the engine's own queue grows. Over 4 s, so
    # that its queue is sampled (every 0.5 s) often enough on a busy machine to show the trend, which
    # outranks a client that also fell behind.
    overloaded = load("run", "--url", mock, "--duration", "4", "--output-tokens", "10", "--rate", "200")
    assert overloaded.returncode == 4, overloaded.stdout + overloaded.stderr
    assert "OVERLOADED (above capacity: the engine's backlog grew): backlog" in overloaded.stdout
    # Every request refused (the mock takes at most 4096 output tokens): never VALID, exit 5.
    refused = load("run", "--url", mock, "--duration", "1", "--rate", "5", "--output-tokens", "5000")
    assert refused.returncode == 5, refused.stdout + refused.stderr
    assert "ENGINE_FAILED (most requests failed)" in refused.stdout and "http_400" in refused.stdout


def test_bad_input_names_the_flag(mock: str) -> None:
    bad = load("run", "--url", "ftp://x", "--model", "m")
    assert bad.returncode == 2 and "--url" in bad.stderr
