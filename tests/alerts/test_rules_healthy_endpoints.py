"""promtool cases of ServescopeHealthyEndpointsLow (group servescope-engine) and the endpoint count record:
healthy endpoints per model below 75% of the day's median, for 15m.

The baseline needs a day: 5 min samples and evaluations.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerts.promtool import TARGET, case, check, firing, run_promtool, series

LOW = "ServescopeHealthyEndpointsLow"
KV = "servescope_serving_kv_cache_usage_ratio"


def _endpoint(model: str, n: int) -> dict[str, str]:
    return {**TARGET, "model_name": model, "engine": "0", "endpoint": f"http://10.1.{n}.1:8000/metrics"}


# deepseek runs 4 endpoints for a day; 2 die at 24h (their series go). qwen loses 1 of 4 at 24h: 3 is
# 75%, not under. llama's only endpoint dies at 24h: its count is gone, read as 0. At 12h the deepseek
# endpoints drop to 2 as well, but without a day of baseline nothing is judged.
DAY = "0.4x287"


def _low(model: str, count: int) -> str:
    return (
        f"{model} has {count} endpoints answering, under 75% of its median of the last day: engines died and "
        "were not replaced, and requests no engine answers leave no latency sample to burn the SLO."
    )


LOW_CASE = case(
    LOW,
    [
        series(KV, _endpoint("deepseek", 1), f"{DAY} 0.4x30"),
        series(KV, _endpoint("deepseek", 2), f"{DAY} 0.4x30"),
        # 3 and 4 also go away from 12h to 12h50 (a rollout) and die at 24h.
        *(series(KV, _endpoint("deepseek", n), "0.4x143 stale _x10 0.4x132 stale") for n in (3, 4)),
        *(series(KV, _endpoint("qwen", n), f"{DAY} 0.4x30") for n in (1, 2, 3)),
        series(KV, _endpoint("qwen", 4), f"{DAY} stale"),
        series(KV, _endpoint("llama", 1), f"{DAY} stale"),
    ],
    check(LOW, "12h30m"),  # 2 of 4, but no day of baseline yet
    check(LOW, "24h10m"),  # pending since 24h
    check(
        LOW,
        "24h15m",
        firing(LOW, {"model_name": "deepseek"}, _low("deepseek", 2)),
        firing(LOW, {"model_name": "llama"}, _low("llama", 0)),
    ),
    interval="5m",
)
CASES = [LOW_CASE]


@pytest.mark.e2e
def test_healthy_endpoints(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path, evaluation_interval="5m")
