"""promtool cases of paging on harm: a cause alone (a queue, preemptions, a full KV cache on a busy GPU)
is a ticket, never a page, while the TTFT objective holds; the page comes with the burn on the SLO's own
bound, and a gap of three minutes in the scrapes neither resolves it nor fires it again.

Engine A of deepseek on a saturated GPU 0 with 90% of its KV cache from minute 5, as in
test_rules_serving.py; its TTFT histogram has vLLM's buckets around the bound (0.25, 0.5, 1.0). 1 min
samples and evaluations; what pages is stated on ALERTS.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.alerts.pages import expand, fired_throughout, never_paged, pages_only, quiet_node
from tests.alerts.promtool import case, check, run_promtool, series
from tests.alerts.serving import (
    ENGINE_A,
    GPU0,
    GPU1,
    HURTING,
    KV,
    PLACEMENT,
    RUNNING,
    TTFT_BURN_FROM_3M,
    UTIL,
    WAITING,
    engine_page,
    ttft,
)
from tests.alerts.slo import ttft_layout

MINUTES = 40
PREEMPTIONS = "servescope_serving_preemptions_total"
BUCKETS = ("0.25", "0.5", "1.0", "+Inf")
# P99 375 ms: per minute 98 of 100 requests under 0.25 s, all of them under 0.5 s.
P99_375MS = [(MINUTES, (98, 100, 100, 100))]
# P99 280 ms: 99.5% under 0.25 s... the 99th percentile falls just past it: 0.25 + 0.25 x 0.5/4.
P99_280MS = [(MINUTES, (96, 100, 100, 100))]


def busy_engine(kv: str = f"0.5x4 0.9x{MINUTES - 4}") -> list[dict[str, str]]:
    """Engine A, its GPU 0 saturated throughout, its KV cache 90% full from minute 5 (and GPU 1 idle)."""
    return [
        *quiet_node(MINUTES),
        series(UTIL, GPU0, f"0.95x{MINUTES}"),
        series(UTIL, GPU1, f"0.4x{MINUTES}"),
        series(KV, ENGINE_A, kv),
        *PLACEMENT,
    ]


# A small steady queue (2 to 6 waiting behind 8 running) while every request gets its first token under
# 0.5 s (P99 375 ms): the KV and saturation tickets, no page.
SMALL_QUEUE = case(
    "a small steady queue while the TTFT objective holds",
    [
        *busy_engine(),
        series(WAITING, ENGINE_A, " ".join(str(2 + minute % 5) for minute in range(MINUTES + 1))),
        series(RUNNING, ENGINE_A, f"8x{MINUTES}"),
        *ttft_layout(ENGINE_A, BUCKETS, P99_375MS),
    ],
    check(HURTING, "20m"),
    exprs=[never_paged(f"{MINUTES}m", f"{MINUTES}m")],
)
# Preemptions at 1/s for 12 minutes (KV exhausted at a peak) while the first tokens come in under 0.3 s:
# neither a page nor, being shorter than its 15 min, the preemption ticket.
PREEMPTION_SPIKE = case(
    "a 12-minute preemption spike while the TTFT objective holds",
    [
        *busy_engine(),
        series(PREEMPTIONS, ENGINE_A, "0x9 60+60x11 720x20"),
        *ttft_layout(ENGINE_A, BUCKETS, P99_280MS),
    ],
    check(HURTING, "20m"),
    check("ServescopePreemptionsSustained", "30m"),
    exprs=[never_paged(f"{MINUTES}m", f"{MINUTES}m")],
)


def _gap(inputs: list[dict[str, str]], first: int, minutes: int) -> list[dict[str, str]]:
    """The exporter's series without samples from minute `first` for `minutes` (Prometheus could not scrape
    it: a staleness marker, then nothing), its `up` 0 meanwhile."""
    out = []
    for item in inputs:
        steps = expand(item["values"])
        if item["series"].startswith("up{"):
            steps[first : first + minutes] = ["0"] * minutes
        elif 'job="servescope"' in item["series"]:
            steps[first : first + minutes] = ["stale"] + ["_"] * (minutes - 1)
        out.append({**item, "values": " ".join(steps)})
    return out


# The page, and a gap in the exporter's scrapes at 20m (3 minutes, and 8: longer than the 5 min rates
# the burn is read from): one episode of each page from its first firing to the end, for the engine's page
# and for the model's burn page (muted under it in Alertmanager).
BURN = [*busy_engine(), *ttft(ENGINE_A, TTFT_BURN_FROM_3M, MINUTES)]
BURN_PAGE = ("ServescopeTtftSloBurnFast", {"model_name": "deepseek"})


def through_a_gap(minutes: int) -> dict[str, Any]:
    # Past blind_for (5m) the fleet's one exporter down is a blind fleet: a page of its own.
    blind = [("ServescopeMonitoringBlind", {})] if minutes > 5 else []
    return case(
        f"a page through a {minutes}-minute gap in the scrapes",
        _gap(BURN, 20, minutes),
        check(HURTING, "6m"),
        exprs=[
            pages_only(f"{20 + minutes - 1}m", (HURTING, engine_page(ENGINE_A)), *blind, BURN_PAGE),
            fired_throughout(
                HURTING, engine_page(ENGINE_A), f"{MINUTES}m", f"{MINUTES - 7}m", MINUTES - 7 + 1
            ),
            fired_throughout(*BURN_PAGE, f"{MINUTES}m", f"{MINUTES - 7}m", MINUTES - 7 + 1),
        ],
    )


CASES: list[dict[str, Any]] = [SMALL_QUEUE, PREEMPTION_SPIKE, through_a_gap(3), through_a_gap(8)]


@pytest.mark.e2e
def test_pages_need_harm_and_survive_scrape_gaps(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)
