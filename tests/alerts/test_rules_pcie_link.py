"""promtool cases for ServescopePcieLinkDegraded: the width always, the generation only under load.

The alert takes the highest generation over the last 10 min (hardware_window) and judges it only while
the GPU's mean utilisation over those 10 min is above 30%: an idle GPU idles its link at Gen 1 by design.
1 min samples and evaluations; `for: 10m`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.alerts.inputs import GPU1
from tests.alerts.promtool import GPU_BY, ON_GPU, case, check, fires, firing, run_promtool, series

LINK = "ServescopePcieLinkDegraded"
UTIL = "servescope_gpu_utilization_ratio"
GENERATION = "servescope_gpu_pcie_link_generation"
WIDTH = "servescope_gpu_pcie_link_width"
GPU0 = GPU_BY
GPU1_BY = {k: GPU1[k] for k in GPU_BY}
ON_GPU1 = "node-a GPU 1 (GPU-0001)"


def _link(
    gpu: dict[str, str], generation: str, width: str, util: str, minutes: int = 40
) -> list[dict[str, str]]:
    """A Gen5 x16 GPU's link series (current values as given) and its utilisation."""
    labels = {"job": "servescope", **gpu}
    return [
        series(GENERATION, labels, generation),
        series(f"{GENERATION.replace('generation', 'max_generation')}", labels, f"5x{minutes}"),
        series(WIDTH, labels, width),
        series(WIDTH.replace("width", "max_width"), labels, f"16x{minutes}"),
        series(UTIL, labels, util),
    ]


def _description(on_gpu: str, part: str, value: int) -> str:
    return (
        f"{on_gpu}: its PCIe link {part} is {value}, below the maximum of GPU and slot "
        f"(servescope_gpu_pcie_link_max_{part}): weight loading and host transfers run slower; reseat the "
        "GPU or check its riser and slot."
    )


# GPU 0 trained at x8 of x16 until 20m, at full width after; idle (Gen 1) all along: the width alone fires.
NARROW = case(
    f"{LINK}: x8 of x16, at idle too",
    _link(GPU0, "1x40", "8x20 16x19", "0x40"),
    check(LINK, "9m"),  # pending since 0m
    fires(LINK, "11m", {**GPU0, "degraded": "width"}, _description(ON_GPU, "width", 8)),
    check(LINK, "21m"),  # retrained at x16
)

# GPU 0 idle at Gen 1 (power saving): silent. GPU 1 busy from 5m at Gen 3 of Gen 5 until 30m: fires once
# its 10 min mean utilisation passes 30% (at 7m: 3 busy samples of 8 at 0.9 is 34%) and for 10m.
# Back at Gen 5 from 30m, the highest generation over the window reaches the maximum at once.
BUSY_SLOW = case(
    f"{LINK}: a busy link below its generation; an idle one is not",
    [
        *_link(GPU0, "1x40", "16x40", "0.01x40"),
        *_link(GPU1_BY, "1x4 3x25 5x10", "16x40", "0x4 0.9x35"),
    ],
    check(LINK, "15m"),  # GPU 1 pending since 8m
    check(
        LINK,
        "19m",
        firing(LINK, {**GPU1_BY, "degraded": "generation"}, _description(ON_GPU1, "generation", 3)),
    ),
    check(LINK, "31m"),
)

# A busy GPU whose link drops to Gen 1 between bursts and reaches Gen 5 in each: the highest generation over
# the window is the maximum, silent throughout.
BURSTY = case(
    f"{LINK}: a busy link that idles down between bursts",
    _link(GPU0, " ".join(["1 1 5"] * 13), "16x40", "0.6x40"),
    check(LINK, "15m"),
    check(LINK, "35m"),
)

CASES: list[dict[str, Any]] = [NARROW, BUSY_SLOW, BURSTY]


@pytest.mark.e2e
def test_pcie_link_degraded(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)
