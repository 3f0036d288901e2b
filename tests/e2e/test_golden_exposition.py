"""node_exporter-style end to end: the real executable on a simulated node, diffed against a golden file.

Regenerate the golden file with UPDATE_GOLDEN=1 after an intended change, and review the diff.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.support import Served

pytestmark = pytest.mark.e2e

GOLDEN = Path(__file__).parent.parent / "golden" / "simulated-8xH200.prom"

# Families whose values move with simulated time or with this machine; their series stay in the
# comparison (names and labels must match), their values are masked.
VOLATILE = re.compile(
    r"^servescope_(gpu_(utilization_ratio|memory_utilization_ratio|temperature_celsius|power_watts|"
    r"energy_joules_total|clock_hertz|clock_event_reason_active|pcie_link_generation)|source_last_success_timestamp_seconds|"
    r"source_collect_duration_seconds|exposition_render_duration_seconds|"
    r"dcgm_(pcie|nvlink)_(tx|rx)_bytes_per_second|dcgm_\w+_ratio)\b"
)

DCGM_FIELD_SERIES = re.compile(r"^servescope_dcgm_(?!field_supported)\w+\{gpu=", re.MULTILINE)


def settled_exposition(base: str) -> str:
    """The exposition once every simulated GPU has a full DCGM row (profiling fields start as N/A) and
    its derived memory series (the derived source runs every 5 s, so its first cycle may see no samples)."""
    deadline = time.monotonic() + 20
    while True:
        text = httpx.get(f"{base}/metrics").text
        # Every one of the 28 watched fields has a value on every GPU (unsupported ones would be listed
        # in servescope_dcgm_field_supported instead; on the simulated H200s there are none).
        fields = len(DCGM_FIELD_SERIES.findall(text))
        derived = text.count("\nservescope_gpu_process_memory_used_peak_bytes{")
        # Discovery has looked at the 8 GPU processes NVML lists (its source runs on its own clock).
        outcomes = sum(
            int(n) for n in re.findall(r"^servescope_vllm_discovery_gpu_processes\{.*\} (\d+)$", text, re.M)
        )
        if (
            text.count("\nservescope_dcgm_sm_active_ratio{") == 8
            and fields == 8 * 28
            and derived == outcomes == 8
        ):
            return text
        assert time.monotonic() < deadline, "DCGM series did not settle"
        time.sleep(0.2)


def normalise(text: str) -> str:
    out = []
    for raw in text.splitlines():
        if raw.startswith(("process_", "# HELP process_", "# TYPE process_")):
            continue  # the exporter's own CPU/RSS, from prometheus_client
        line = re.sub(r'python_version="[^"]*"', 'python_version="X"', raw)
        line = re.sub(r'servescope_build_info\{version="[^"]*"', 'servescope_build_info{version="X"', line)
        if not line.startswith("#") and VOLATILE.match(line):
            line = line.rsplit(" ", 1)[0] + " <volatile>"
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.e2e
def test_exposition_matches_golden(simulated: Served) -> None:
    got = normalise(settled_exposition(simulated.base))
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(got)
    want = GOLDEN.read_text()
    assert got == want, "exposition differs from the golden file; rerun with UPDATE_GOLDEN=1 if intended"


@pytest.mark.e2e
def test_promtool_check_metrics_is_clean(simulated: Served, promtool: str) -> None:
    body = settled_exposition(simulated.base)
    assert (
        "servescope_gpu_nvlink_errors_total" in body
        and "servescope_dcgm_nvlink_crc_flit_errors_total" in body
    )
    result = subprocess.run(
        [promtool, "check", "metrics"], input=body, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.strip() == "" and result.stderr.strip() == "", result.stderr + result.stdout


@pytest.mark.parametrize("path", ["/", "/healthz", "/api/v1/sources"])
def test_other_endpoints_answer(simulated: Served, path: str) -> None:
    assert httpx.get(f"{simulated.base}{path}").status_code == 200
