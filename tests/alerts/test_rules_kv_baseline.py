"""promtool cases of the KV daily baseline records (group servescope-kv-baseline) and of
ServescopeKvCacheAnomaly.

The baseline needs a day of history, so its records and the anomaly alert run at 5m, input samples every
5m too (one day-long test group for speed).

Prometheus 2.42 (the promtool here) selects range windows closed at both ends, [t - 5m, t]: with samples
every 5m, avg_over_time(x[5m]) at t averages x(t - 5m) and x(t); the first evaluation (t = 0) sees x(0) only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.alerts.promtool import TARGET, case, check, firing, run_promtool, series
from tests.alerts.serving import ENGINE_A, ENGINE_B, ENGINE_C, GPU0, KV, ON_A, node_gpu_facts

AVG5M = "engine:servescope_kv_cache_usage:avg5m"
AVG1D = "engine:servescope_kv_cache_usage:avg1d"
STDDEV1D = "engine:servescope_kv_cache_usage:stddev1d"
# Engine C carries the exact checks of the recording rules.
# The baseline is kept by node (hostname), not by `instance` (the exporter pod's address changes at every
# rollout).
BASELINE_LABELS = {**{k: v for k, v in ENGINE_C.items() if k != "instance"}, "hostname": "node-a"}
C_LABELS = "{" + ",".join(f'{k}="{v}"' for k, v in sorted(BASELINE_LABELS.items())) + "}"


def record(name: str, eval_time: str, value: float) -> dict[str, Any]:
    """The record `name` of engine C at `eval_time` (a recorded series keeps its name)."""
    return {
        "expr": f'{name}{{engine="2"}}',
        "eval_time": eval_time,
        "exp_samples": [{"labels": name + C_LABELS, "value": value}],
    }


# Engine C: kv(0) = 0.25, kv(5m) = 0.25, kv(10m) = 0.75, kv(15m) = 0.25, then 0.75 from 20m on.
RECORDS = [
    # avg5m(10m) = (kv(5m) + kv(10m)) / 2 = (0.25 + 0.75) / 2 = 0.5
    record(AVG5M, "10m", 0.5),
    # avg5m(15m) = (kv(10m) + kv(15m)) / 2 = (0.75 + 0.25) / 2 = 0.5
    record(AVG5M, "15m", 0.5),
    # avg5m so far: 0m 0.25 (kv(0) alone), 5m 0.25, 10m 0.5, 15m 0.5.
    # avg1d(15m) = (0.25 + 0.25 + 0.5 + 0.5) / 4 = 1.5 / 4 = 0.375
    record(AVG1D, "15m", 0.375),
    # deviations from 0.375: -0.125, -0.125, +0.125, +0.125; variance = 4 x 0.125^2 / 4 = 0.015625;
    # stddev1d(15m) = sqrt(0.015625) = 0.125
    record(STDDEV1D, "15m", 0.125),
    # avg5m(20m) = (0.25 + 0.75) / 2 = 0.5, then 0.75 from 25m on. At 24h25m the 1d window
    # [0h25m, 24h25m] holds 0.75 only: avg1d = 0.75, stddev1d = 0 (the early samples have left it).
    record(AVG1D, "24h25m", 0.75),
    record(STDDEV1D, "24h25m", 0.0),
]

# --- ServescopeKvCacheAnomaly (|avg5m - avg1d| / max(stddev1d, 0.02) > 3 for 15m) ----------------------
# Baseline day of engines A and B: 30% from 0h00 to 11h55 (144 samples), 50% from 12h00 to 23h55 (144).
# avg5m: 144 x 0.3 (0h00-11h55), 0.4 (12h00), 143 x 0.5 (12h05-23h55). Over a day: mean ~0.40, stddev ~0.10.
#
# Engine A jumps to 81% from 24h00 to 24h55 (12 samples), then 50% again. avg5m(24h00) = (0.5 + 0.81) / 2
# = 0.655, then 0.81. At 24h30 the 1d window [0h30, 24h30] holds 289 samples: 138 x 0.3, 0.4, 143 x 0.5,
# 0.655, 6 x 0.81. Sum = 41.4 + 0.4 + 71.5 + 0.655 + 4.86 = 118.815, mean = 118.815 / 289 = 0.411125;
# sum of squares = 12.42 + 0.16 + 35.75 + 0.429025 + 3.9366 = 52.695625,
# variance = 52.695625 / 289 - 0.411125^2 = 0.0133144, stddev = 0.115388;
# z = (0.81 - 0.411125) / 0.115388 = 3.457.
#   z by evaluation: 24h00 2.53, 24h05 3.94, 24h10 3.83, 24h15 3.73, 24h20 3.63, 24h25 3.54, 24h30 3.46,
#   ... 24h55 3.11, 25h00 1.85 (avg5m 0.655), then ~0.6.
# promtool evaluates the rule groups in no fixed order: when servescope-serving runs before
# servescope-kv-baseline, the alert reads the records of the previous evaluation (5m late). So: pending
# from 24h05 (or 24h10), firing from 24h20 (or 24h25); at 24h30 the value is z(24h30) = 3.46 or
# z(24h25) = 3.54, both "3.5"; resolved at 25h00 (or 25h05).
# Engine B stays in its band (50%, 30%, 45%): z <= 1.05; every check below lists engine A only, so
# engine B is asserted silent at each of them.
# Both are silent at 12h30: without a 23h-old baseline the switch to 50% at 12h would read as an
# anomaly (z ~ 4.8 at 12h30 against a half-day baseline of 30%).
# Engine D drops to 5% after the same baseline day (a restart, a quiet night): no alert, a drop harms
# nobody. Engine E is engine A's twin whose exporter was rolled out at 12h (a new pod address, so a new
# `instance`): its baseline carries on and it fires with engine A.
ANOMALY = "ServescopeKvCacheAnomaly"
BASELINE_DAY = "0.3x143 0.5x143"
ENGINE_D = {**TARGET, "model_name": "deepseek", "engine": "3", "endpoint": "http://10.0.0.1:8003/metrics"}
ENGINE_E = {**TARGET, "model_name": "qwen", "engine": "0", "endpoint": "http://10.0.0.5:8000/metrics"}
ROLLED_OUT = {**ENGINE_E, "instance": "10.0.7.3:9108"}


def anomaly(engine: dict[str, str], on: str) -> dict[str, Any]:
    labels = {**{k: v for k, v in engine.items() if k != "instance"}, "hostname": "node-a"}
    return firing(
        ANOMALY, labels, f"{on}: KV usage is 3.5 daily standard deviations above its mean of the last day."
    )


ANOMALY_CASE = case(
    f"{ANOMALY} and the KV baseline records",
    [
        series(KV, ENGINE_A, f"{BASELINE_DAY} 0.81x11 0.5x11"),
        series(KV, ENGINE_B, f"{BASELINE_DAY} 0.5x5 0.3x5 0.45x11"),
        series(KV, ENGINE_C, "0.25 0.25 0.75 0.25 0.75x300"),
        series(KV, ENGINE_D, f"{BASELINE_DAY} 0.05x22"),
        series(KV, ENGINE_E, "0.3x143 stale"),
        series(KV, ROLLED_OUT, "_x144 0.5x143 0.81x11 0.5x11"),
        # The node's GPU info, from the exporter before the rollout and after it.
        node_gpu_facts(GPU0, 310),
        node_gpu_facts({**GPU0, "instance": ROLLED_OUT["instance"]}, values="_x144 1x166"),
    ],
    check(ANOMALY, "12h30m"),  # a half-day baseline: no verdict yet
    check(ANOMALY, "24h15m"),  # anomalous since 24h05 (or 24h10): pending
    check(
        ANOMALY,
        "24h30m",
        anomaly(ENGINE_A, ON_A),
        anomaly(ENGINE_E, "qwen engine 0 at http://10.0.0.5:8000/metrics"),
    ),
    check(ANOMALY, "25h10m"),  # back to 50%
    interval="5m",
    exprs=RECORDS,
)

CASES: list[dict[str, Any]] = [ANOMALY_CASE]


@pytest.mark.e2e
def test_kv_baseline(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path, evaluation_interval="5m")
