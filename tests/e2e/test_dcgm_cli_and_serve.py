"""`servescope dcgm ...` on captured files, and the DCGM source inside the real exporter."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers import SAMPLES
from tests.support import SERVESCOPE, start_servescope, stop

pytestmark = pytest.mark.e2e


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SERVESCOPE, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.e2e
def test_parse_profiling_sample_prints_one_json_object_per_value() -> None:
    result = run("dcgm", "parse", str(SAMPLES / "dcgmi-dmon-4.2-profiling.txt"))
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 80
    assert {"entity": "GPU", "entity_id": "0", "field_id": 1001, "field": "GRACT", "value": 0.888} in records
    assert records[0] == {
        "entity": "GPU",
        "entity_id": "0",
        "field_id": 1001,
        "field": "GRACT",
        "value": None,
        "status": "na",
    }


@pytest.mark.e2e
def test_parse_reads_stdin_and_reports_dcgmi_errors() -> None:
    text = (SAMPLES / "dcgmi-dmon-3.1-watch-error.txt").read_text()
    result = run("dcgm", "parse", "-", stdin=text)
    assert result.returncode == 0
    assert "watch_not_supported" in result.stderr and result.stdout == ""


@pytest.mark.e2e
def test_parse_refuses_input_that_is_not_dmon_output() -> None:
    result = run("dcgm", "parse", str(SAMPLES / "vllm-0.32-cpu-idle.txt"))
    assert result.returncode == 2
    assert result.stderr.strip().endswith("not dcgmi dmon output: no '#Entity' header line found")
    missing = run("dcgm", "parse", "/nonexistent/file")
    assert missing.returncode == 2 and "cannot read /nonexistent/file" in missing.stderr


@pytest.mark.e2e
def test_parse_exporter_format() -> None:
    result = run("dcgm", "parse", "--format", "exporter", str(SAMPLES / "dcgm-exporter-2.x.txt"))
    assert result.returncode == 0
    power = [json.loads(line) for line in result.stdout.splitlines() if '"field_id": 155' in line]
    assert power == [
        {
            "entity": "GPU",
            "entity_id": "0",
            "uuid": "GPU-6bf47ca9-ad3e-15db-beed-1079a7d74116",
            "field_id": 155,
            "field": "DCGM_FI_DEV_POWER_USAGE",
            "value": 302.206,
        }
    ]
    wrong = run("dcgm", "parse", "--format", "exporter", str(SAMPLES / "dcgmi-dmon-4.2-profiling.txt"))
    assert wrong.returncode == 2


@pytest.mark.e2e
def test_fields_prints_the_default_file_and_checks_a_custom_one(tmp_path: Path) -> None:
    result = run("dcgm", "fields")
    assert result.returncode == 0 and "1009, servescope_dcgm_pcie_tx_bytes_per_second" in result.stdout
    bad = tmp_path / "bad.csv"
    bad.write_text("# mine\n409, servescope_x_total, counter, parsecs, -, nope\n")
    result = run("dcgm", "fields", "--counters", str(bad))
    assert result.returncode == 2
    assert f"{bad} line 2: unknown unit 'parsecs'" in result.stderr


@pytest.mark.e2e
def test_bad_counters_file_fails_serve_at_start_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "409, servescope_x_total, counter, count, -, ok\n410, servescope_x, counter, count, -, no\n"
    )
    result = run("serve", "--simulate", "--listen", "127.0.0.1:0", "--dcgm-counters", str(bad))
    assert result.returncode == 1
    assert f"{bad} line 2: metric 'servescope_x'" in result.stderr.strip().splitlines()[-1]


@pytest.mark.e2e
def test_without_dcgmi_the_exporter_runs_ready_and_says_dcgm_is_not_installed() -> None:
    served = start_servescope("--simulate", "--dcgmi", "/nonexistent/dcgmi")
    try:
        deadline = time.monotonic() + 10
        while True:
            text = httpx.get(f"{served.base}/metrics").text
            if 'reason="not_installed"' in text or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert 'servescope_source_up{source="dcgm"} 0' in text
        assert 'servescope_source_errors_total{source="dcgm",reason="not_installed"}' in text
        assert 'servescope_gpu_up{gpu="0"' in text and "servescope_dcgm_nvlink" not in text
        ready = httpx.get(f"{served.base}/readyz")
        assert ready.status_code == 200
        assert ready.json()["sources"]["dcgm"]["detail"].startswith("absent")
    finally:
        stop(served)
