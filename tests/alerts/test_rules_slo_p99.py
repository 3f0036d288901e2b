"""promtool cases for ServescopeTtftP99High and ServescopeSloBucketMissing (group servescope-slo): the P99
over one bucket layout, and the SLO and the P99 over endpoints of one model with different layouts.

1 min samples and evaluations; the SLO's arithmetic is explained in test_rules_slo.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerts.promtool import ENGINE, case, check, fires, run_promtool
from tests.alerts.slo import DEEPSEEK, MISSING_TAIL, alert_state, histogram, ratios, ttft_layout

# --- P99 TTFT (for 10m, 5m window) -------------------------------------------------------------------------
P99 = "ServescopeTtftP99High"
VLLM_BOUNDS = ("0.25", "0.5", "1.0", "+Inf")
# Per minute: requests under 0.25 s, 0.5 s, 1 s, and all of them.
FAST_REPLIES = (100, 100, 100, 100)  # P99 = 0.99 * 0.25 s = 0.2475 s
# 10 of 100 between 0.5 s and 1 s: P99 = 0.5 + 0.5 * (99 - 90) / 10 = 0.95 s
SLOW_REPLIES = (50, 90, 100, 100)

P99_HIGH = case(
    P99,
    # fast to 10m, slow from 11m to 30m, fast after
    ttft_layout(DEEPSEEK, VLLM_BOUNDS, [(10, FAST_REPLIES), (20, SLOW_REPLIES), (10, FAST_REPLIES)]),
    check(P99, "10m"),  # P99 0.2475 s
    # 11m: 4 fast minutes and a slow one in the window: 450/490/500/500, rank 495 -> 0.5 + 0.5 * 5/10 s.
    check(P99, "20m"),  # pending since 11m, `for: 10m`
    fires(
        P99,
        "25m",
        {"model_name": "deepseek"},
        "deepseek: P99 time to first token is 950ms (threshold 0.5 s).",
    ),
    check(P99, "36m"),  # recovered: the 5m window holds fast minutes only since 35m
    exprs=[alert_state(P99, "deepseek", "20m")],
)

# --- mixed bucket layouts (for 30m): one model, a vLLM endpoint and an SGLang one, every request fast ----
# SGLang's TTFT buckets skip 0.5 (... 0.4, 0.6 ...): dividing by both endpoints' counts read as "50% slow"
# and paged. The SGLang endpoint counts from its nearest lower bucket (0.4), and ServescopeSloBucketMissing
# names it.
MISSING = "ServescopeSloBucketMissing"
VLLM_EP = {**ENGINE, "model_name": "mixed", "endpoint": "http://10.0.0.7:8000/metrics"}
SGLANG_EP = {**ENGINE, "model_name": "mixed", "engine": "1", "endpoint": "http://10.0.0.8:30000/metrics"}
MIXED_STEPS = 40
ALL_FAST = [(MIXED_STEPS, (100, 100))]
MIXED = case(
    f"SLO over mixed bucket layouts, {MISSING}",
    [
        *histogram("ttft", VLLM_EP, ALL_FAST),
        *histogram("e2e", VLLM_EP, ALL_FAST),
        *ttft_layout(SGLANG_EP, ("0.4", "0.6", "+Inf"), [(MIXED_STEPS, (100, 100, 100))]),
        *histogram("e2e", SGLANG_EP, ALL_FAST),
    ],
    check("ServescopeTtftSloBurnFast", "10m"),
    check("ServescopeTtftSloBurnFast", "35m"),
    # Summed with the SGLang buckets, vLLM's le="0.5" count fell back at 0.6: a P99 of 0.6 s paged.
    check(P99, "35m"),
    check(MISSING, "10m"),
    check(MISSING, "29m"),  # pending since 0m
    fires(
        MISSING,
        "31m",
        {**SGLANG_EP, "sli": "ttft"},
        "mixed engine 1 at http://10.0.0.8:30000/metrics: its ttft histogram has no bucket at the SLO bound "
        f"(time to first token 0.5 s, end-to-end latency 60.0 s), {MISSING_TAIL}",
    ),
    # Every request under the bound: no error, however the endpoints' buckets are laid out.
    exprs=ratios("ttft", "mixed", "35m", w5m=0.0, w1h=0.0),
)

# --- P99 over mixed bucket layouts: each endpoint's P99 in its own layout, the model's slowest one ---------
# Summed, the layouts interleave (0.25 and 0.5 from vLLM, 0.4 and 0.6 from SGLang): with every request
# fast the sum reads 0.6 + 0.4 * 98/100 = 0.992 s and paged. Per endpoint: vLLM 0.99 * 0.25 = 0.2475 s,
# SGLang 0.99 * 0.4 = 0.396 s. From 20m SGLang turns slow: 20 of 100 over 0.6 s, P99 = 0.6 + 0.4 * 19/20.
P99_VLLM = {**VLLM_EP, "model_name": "split"}
P99_SGLANG = {**SGLANG_EP, "model_name": "split"}
P99_MIXED = case(
    f"{P99} over mixed bucket layouts",
    [
        *ttft_layout(P99_VLLM, VLLM_BOUNDS, [(45, FAST_REPLIES)]),
        *ttft_layout(
            P99_SGLANG, ("0.4", "0.6", "1.0", "+Inf"), [(20, (100, 100, 100, 100)), (25, (50, 80, 100, 100))]
        ),
    ],
    check(P99, "15m"),  # every request fast: nothing pending either (the sum would read 0.992 s)
    check(P99, "19m"),
    fires(P99, "40m", {"model_name": "split"}, "split: P99 time to first token is 980ms (threshold 0.5 s)."),
    exprs=[
        {"expr": f'ALERTS{{alertname="{P99}"}}', "eval_time": "19m", "exp_samples": []},
        alert_state(P99, "split", "25m"),
    ],
)

CASES = [P99_HIGH, MIXED, P99_MIXED]


@pytest.mark.e2e
def test_slo_p99_and_bucket_layouts(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path)
