"""M3: a `dcgmi` that prints without newlines is cut into dropped lines and restarted, never buffered."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
import pytest

from servescope.core.http_server import HARD_STOP_SECONDS
from tests.faults.exporter import exporter, series
from tests.faults.peers import rss_mib, rss_peak_mib
from tests.support import generous

pytestmark = pytest.mark.e2e

ENDLESS_DCGMI = f"""#!{sys.executable}
import signal, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only a kill of its group stops it
block = "1234567890" * 6554
while True:
    sys.stdout.write(block)
"""
# The exporter's own footprint is about 60 MiB; a line buffered whole passed 2 GiB within 3 s.
RSS_BOUND_MIB = 150


def endless_dcgmi(folder: Path) -> Path:
    script = folder / "dcgmi"
    script.write_text(ENDLESS_DCGMI)
    script.chmod(0o755)
    return script


def test_a_dcgmi_without_newlines_stays_bounded_and_the_exporter_answers(tmp_path: Path) -> None:
    args = ["--no-nvml", "--no-discovery", "--dcgmi", str(endless_dcgmi(tmp_path)), "--dcgm-interval", "1"]
    with exporter(*args, log=tmp_path / "log") as served:
        slowest, rss = 0.0, []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for path in ("/healthz", "/metrics"):
                started = time.monotonic()
                assert served.get(path, timeout=generous(2)).status_code == 200
                slowest = max(slowest, time.monotonic() - started)
            rss.append(rss_mib(served.process.pid))
            time.sleep(0.25)
        text = served.get("/metrics").text
        peak = rss_peak_mib(served.process.pid)
        stopped_in = served.stop_seconds(limit=30)
    print(f"RSS peak {peak:.0f} MiB, last {rss[-1]:.0f} MiB; slowest answer {slowest * 1000:.0f} ms")
    print(f"stopped {stopped_in:.2f} s after SIGTERM")
    assert peak < RSS_BOUND_MIB, f"RSS peaked at {peak:.0f} MiB"
    (dropped,) = series(text, "servescope_source_errors_total", source="dcgm", reason="line_too_long")
    assert dropped >= 1
    assert series(text, "servescope_source_up", source="dcgm") == [0]
    # The stuck dcgmi ignores SIGTERM: only the hard stop, killing its group, ends it.
    assert stopped_in < generous(HARD_STOP_SECONDS), f"SIGTERM took {stopped_in:.2f} s"
    assert "Traceback" not in (tmp_path / "log").read_text()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{served.base}/healthz", timeout=1.0)
