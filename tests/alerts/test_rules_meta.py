"""promtool cases for the alerts about the monitoring itself (group servescope-meta).

1 min scrape and evaluation interval. Every alert but Watchdog has `for: 5m` (down) or `for: 15m` (absent);
each is checked silent one minute before its `for` elapses (while `ALERTS` shows it pending), firing
after, and silent again once the series recovered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.alerts.promtool import (
    ENGINE,
    GPU,
    TARGET,
    case,
    check,
    fires,
    firing,
    run_promtool,
    series,
    series_of,
)

ENDPOINT = ENGINE["endpoint"]
OTHER_ENDPOINT = "http://10.0.0.2:8000/metrics"


def _pending(alert: str, labels: dict[str, str], at: str) -> dict[str, Any]:
    """`ALERTS` holds exactly this pending alert at `at`: the condition is true and `for` runs."""
    severity = firing(alert, {}, "")["exp_labels"]["severity"]
    inner = ",".join(
        f'{k}="{v}"' for k, v in sorted({**labels, "severity": severity, "bundle": "servescope"}.items())
    )
    return {
        "expr": f'ALERTS{{alertname="{alert}"}}',
        "eval_time": at,
        "exp_samples": [
            {"labels": f'ALERTS{{alertname="{alert}",alertstate="pending",{inner}}}', "value": 1}
        ],
    }


# --- Watchdog and the exporter's scrape target -------------------------------------------------------------
WATCHDOG = "ServescopeWatchdog"
WATCHDOG_FIRING = firing(
    WATCHDOG,
    {},
    "This alert always fires. Route it to a dead man's switch; if it stops arriving, Prometheus or "
    "Alertmanager is broken.",
)
DOWN = "ServescopeExporterDown"
NODE_B = {**TARGET, "instance": "node-b:9108"}
# node-a's exporter is scraped fine to 9m, down (up = 0) from 10m to 19m, back from 20m; node-b's always
# answers; node-exporter's target on node-a is down throughout but is not a servescope target.
EXPORTER = case(
    f"{WATCHDOG}, {DOWN}",
    [
        series("up", TARGET, "1x9 0x10 1x10"),
        series("up", NODE_B, "1x30"),
        series("up", {"job": "node-exporter", "instance": "node-a:9100"}, "0x30"),
    ],
    # Watchdog is `vector(1)` with `for: 0m`: it fires from the first evaluation on and is never silent,
    # so it has no "silent before for" nor "recovered" case; it is checked firing at 0m and later instead.
    check(WATCHDOG, "0m", WATCHDOG_FIRING),
    check(WATCHDOG, "30m", WATCHDOG_FIRING),
    check(DOWN, "9m"),
    check(DOWN, "14m"),  # down since 10m: pending
    fires(
        DOWN,
        "15m",
        TARGET,
        "node-a:9108 has been down for 5m: every GPU and serving alert of that node is blind.",
    ),
    check(DOWN, "21m"),  # recovered
    exprs=[_pending(DOWN, TARGET, "14m")],
)

# --- sources (serving endpoints down: test_rules_planned_changes.py) ---------------------------------------
SOURCE = "ServescopeSourceDown"
DCGM = {**TARGET, "source": "dcgm"}
VLLM_ENDPOINT = {**TARGET, "source": "vllm", "endpoint": ENDPOINT}
# The exporter reports each source without an endpoint label and each vLLM endpoint with one. The dcgm
# source fails from 10m to 19m; the first vLLM endpoint stops answering from 30m to 39m, while the vllm
# source itself and the other endpoint keep working.
SOURCES = case(
    SOURCE,
    [
        series("servescope_source_up", DCGM, "1x9 0x10 1x30"),
        series("servescope_source_up", {**TARGET, "source": "nvml"}, "1x50"),
        series("servescope_source_up", {**TARGET, "source": "vllm"}, "1x50"),
        series("servescope_source_up", VLLM_ENDPOINT, "1x29 0x10 1x10"),
        series("servescope_source_up", {**VLLM_ENDPOINT, "endpoint": OTHER_ENDPOINT}, "1x50"),
    ],
    check(SOURCE, "14m"),  # pending
    fires(
        SOURCE,
        "15m",
        DCGM,
        "Source dcgm on node-a:9108 is down; /api/v1/sources on the exporter and "
        "servescope_source_errors_total say why.",
    ),
    check(SOURCE, "21m"),  # recovered
    check(SOURCE, "36m"),  # an endpoint down is not a source down
    exprs=[_pending(SOURCE, DCGM, "14m")],
)

# --- a hung source: up 1, its last success ever older ----------------------------------------------------
STALE = "ServescopeSourceStale"
LAST_SUCCESS = "servescope_source_last_success_timestamp_seconds"
INTERVAL = "servescope_source_interval_seconds"
UP = "servescope_source_up"
NVML_SOURCE = {**TARGET, "source": "nvml"}
# The nvml source (1 s interval) hangs at 10m: its last success stays at 600 s while Prometheus scrapes on
# (the sample's timestamp grows); 3 intervals is under the 60 s floor, so it is stale from 11m01s, at the
# 12m scrape (age 120 s). The dcgm source (30 s interval) runs on: its last success trails by under 90 s.
STALE_CASE = case(
    STALE,
    [
        *series_of(NVML_SOURCE, {LAST_SUCCESS: "0+60x10 600x20 1860+60x10", INTERVAL: "1x40", UP: "1x40"}),
        *series_of(DCGM, {LAST_SUCCESS: "-45+60x40", INTERVAL: "30x40", UP: "1x40"}),
    ],
    check(STALE, "11m"),  # 60 s old: not over the floor
    check(STALE, "16m"),  # stale since 12m: pending
    fires(
        STALE,
        "17m",
        NVML_SOURCE,
        "Source nvml on node-a:9108 last succeeded 7m 0s before the scrape, more than 3 intervals: a "
        "call hangs (NVML around an XID 79, dcgmi) and its series keep their last values.",
    ),
    check(STALE, "32m"),  # collecting again since 31m
)

# --- absent() guards (for 15m) ---------------------------------------------------------------------------
# absent() returns one series labelled with the selector's equality matchers: {job="servescope"}.
ABSENT_LABELS = {"job": "servescope"}
GUARDS = (
    ("ServescopeGpuMetricsAbsent", "servescope_gpu_up", GPU, "1", "GPU"),
    (
        "ServescopeServingMetricsAbsent",
        "servescope_serving_kv_cache_usage_ratio",
        ENGINE,
        "0.4",
        "serving-engine",
    ),
    ("ServescopeDerivedMetricsAbsent", "servescope_gpu_memory_leak_suspected", GPU, "0", "derived memory"),
)


def absent_case(alert: str, metric: str, labels: dict[str, str], value: str, what: str) -> dict[str, Any]:
    """Present to 9m, gone (a staleness marker at 10m, then no samples) to 39m, present again from 40m.

    The same metric from another job stays present throughout: it does not count for job="servescope".
    """
    description = (
        f"{metric} is absent: the alerts built on it cannot fire. Check the scrape configuration "
        '(job="servescope") and the exporters\' sources.'
    )
    assert firing(alert, ABSENT_LABELS, description)["exp_annotations"]["summary"] == (
        f"No {what} series from any servescope exporter."
    )
    return case(
        alert,
        [
            series(metric, labels, f"{value}x9 stale _x29 {value}x10"),
            series(metric, {**labels, "job": "servescope-staging"}, f"{value}x50"),
        ],
        check(alert, "5m"),  # present
        check(alert, "24m"),  # absent since 10m: pending
        check(alert, "25m", firing(alert, ABSENT_LABELS, description)),
        check(alert, "39m", firing(alert, ABSENT_LABELS, description)),
        check(alert, "41m"),  # present again,
        exprs=[_pending(alert, ABSENT_LABELS, "24m")],
    )


CASES = [EXPORTER, SOURCES, STALE_CASE, *(absent_case(*guard) for guard in GUARDS)]


@pytest.mark.e2e
def test_meta_alerts(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)
