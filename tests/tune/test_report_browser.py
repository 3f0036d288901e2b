"""The tuning report renders in headless Chromium: every chart drawn, nothing fetched, no script errors.

`UPDATE_SCREENSHOT=1` also writes the screenshot to docs/images/capacity-report.png.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from servescope.kit.tune.cli import SimulatedLauncher, write_reports
from servescope.kit.tune.space import parse_space
from servescope.kit.tune.strategies import run_study
from servescope_sim.load_runner import start_simulated
from tests.support.browser import headless_chromium
from tests.tune.searches import short_capacity

pytestmark = pytest.mark.e2e
DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "capacity-report.png"
SPACE = {
    "engine": {"num_gpu_blocks": 8192},
    "parameters": {
        "max_num_seqs": [32, 128, 256],
        "quantization": [None, "fp8"],
        "gpu_memory_utilization": [0.9, 0.98],
    },
    "second_objective": "gpus",
    "peak_qps": 100,
    "capacity": short_capacity(15, "ttft:0.5", repeats=2, warmup_s=3),
}


def test_the_report_renders_every_chart_in_headless_chromium(tmp_path: Path) -> None:
    space = parse_space(SPACE)
    study = run_study(space, SimulatedLauncher(space.warmup_s, start_simulated), "grid", remeasure=3)
    write_reports(study, tmp_path)
    requests: list[str] = []
    with headless_chromium() as (_, browser):
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("request", lambda request: requests.append(request.url))
        page.goto((tmp_path / "tune.html").as_uri())
        charts = page.locator("svg")
        assert charts.count() == 5
        for i in range(5):
            box = charts.nth(i).bounding_box()
            assert box is not None and box["width"] > 600 and box["height"] > 300
            assert charts.nth(i).locator("circle").count() > 0  # every chart has points
        titles = charts.evaluate_all("svgs => svgs.map(s => s.querySelector('text').textContent)")
        assert titles[:3] == [
            "Offered rate vs ttft p99",
            "Goodput (requests/s meeting every SLO)",
            "Throughput vs running batch",
        ]
        assert titles[3:] == ["Search progress (grid)", "Pareto front"]
        assert page.locator("svg rect").count() >= 3  # the knee intervals of the top candidates
        shot = page.screenshot(full_page=True)
        assert not errors, errors
    assert requests == [(tmp_path / "tune.html").as_uri()]  # self-contained: nothing else fetched
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "capacity-report.png").write_bytes(shot)
    if os.environ.get("UPDATE_SCREENSHOT"):
        DOCS_SCREENSHOT.write_bytes(shot)
