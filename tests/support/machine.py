"""How busy the machine is, for the few tests whose claim needs free cores (throughput, not logic).

Under the parallel suite a 2-core machine is shared by four test workers and their servers, so a test
that claims "N processes keep a schedule one cannot" measures the neighbours there. Such a test is
marked `idle_cpu`: when it fails on a busy machine it skips, quoting what it measured, and `.ci/run`
runs every `idle_cpu` test again after the suite with SERVESCOPE_TEST_IDLE_CPU=1, where it must pass.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Set by `.ci/run` for its run of the idle_cpu tests on a quiet machine: a failure is then a failure.
IDLE_CPU_RUN = os.environ.get("SERVESCOPE_TEST_IDLE_CPU") == "1"
# Above this share of time with some task waiting for a CPU, the machine's cores are not free.
BUSY_CPU_PRESSURE = 25.0


def cpu_pressure(source: Path = Path("/proc/pressure/cpu")) -> float:
    """Share of the last 10 s some task waited for a CPU (Linux PSI), in percent; 0 where unknown."""
    try:
        first = source.read_text().splitlines()[0]
    except (OSError, IndexError):
        return 0.0
    fields = dict(item.split("=", 1) for item in first.split()[1:] if "=" in item)
    try:
        return float(fields.get("avg10", 0.0))
    except ValueError:
        return 0.0


def skip_if_busy(failure: str) -> None:
    """Skip, quoting `failure`, where the machine was busy and this is not the quiet run; else return
    (the caller then fails with `failure`)."""
    pressure = cpu_pressure()
    if pressure > BUSY_CPU_PRESSURE and not IDLE_CPU_RUN:
        pytest.skip(
            f"CPU pressure {pressure:.0f} % (PSI avg10): the cores were not free, so this measured the "
            f"neighbours ({failure}); .ci/run repeats it on a quiet machine"
        )
