"""promtool cases for the latency SLO: recording rules (servescope-slo-records) and alerts (servescope-slo).

Objective 0.99 of requests under the bound (0.5 s to the first token, 60 s end to end), so the error
budget is 1% and a pair of windows fires when both
error ratios exceed factor x 1%: 14.4% (1h & 5m) or 6% (6h & 30m) pages, 3% (1d & 2h) or 1% (3d & 6h)
tickets. Each scenario picks an error ratio between two factors so that one pair alone fires, and
`promql_expr_test` shows the recorded ratios (hand computed in the comments) that keep the other pair
silent. The description shows `$value`: the long window's ratio of the pair that matched.

Three models run side by side: `deepseek` and `qwen` take turns in the scenarios (the TTFT and the e2e
histograms of one model follow different scenarios, so an alert reading the wrong histogram fails), and
`llama` stays at 0.5% errors, half the budget, throughout: no burn alert may name it.

Arithmetic: the bundle records each model's 5 min rates of good and of all requests once (r(t), exact:
samples are aligned with the evaluations and the counters start at 0, so rate() does not extrapolate),
and a window w's error ratio is 1 - sum(good r(t')) / sum(all r(t')) over the records t' in [T - w, T]
(Prometheus 2.x ranges include both ends). With 1 min records each minute's requests count 5 times, fewer
at the window's ends: at a change of error rate the long windows move a little differently from an exact
ratio over w, which the hand computations below follow ("5-rate sum"). In constant phases the ratio is
the phase's. The 5m ratio is the 5 min rate's. Ratios are compared after `round(x, 0.0001)`: promtool
2.42 compares floats exactly. promtool evaluates every group at every step, the long-window group (every
5 min in Prometheus) included.

promtool evaluates the rule groups in no fixed order (without `group_eval_order`), and Prometheus runs
them independently: an alert may read the recorded ratios of the previous evaluation. Every check here
holds either way: pending checks sit one interval after the condition turns true, and firing checks where
the ratios did not change over the last interval. This is also why the multi-day case evaluates every 5
min and not coarser: a record older than the 5 min lookback would be invisible to a lagging alert.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.alerts.promtool import ENGINE, check, firing, run_promtool, series

DEEPSEEK = ENGINE
QWEN = {**ENGINE, "model_name": "qwen", "endpoint": "http://10.0.0.2:8000/metrics"}
LLAMA = {**ENGINE, "model_name": "llama", "endpoint": "http://10.0.0.3:8000/metrics"}
# Each SLI's good bucket: the bundle's defaults, 0.5 s to the first token and 60 s end to end.
BOUND = {"ttft": "0.5", "e2e": "60.0"}
OBJECTIVE = {sli: f"(99.00% of requests under {le} s)" for sli, le in BOUND.items()}
# sli: (histogram, alert title, words in the description)
SLIS = {
    "ttft": ("servescope_serving_time_to_first_token_seconds", "Ttft", "time to first token"),
    "e2e": ("servescope_serving_e2e_request_latency_seconds", "E2e", "end-to-end latency"),
}
WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")

# (requests, requests under the bound) per scrape interval.
BASE = (1000, 995)  # 0.5% errors: half the budget
BURST = (1000, 800)  # 20%: above 14.4x
MID = (1000, 930)  # 7%: between 6x and 14.4x
SLOW_MID = (1000, 960)  # 4%: between 3x and 6x
LOW = (1000, 985)  # 1.5%: between 1x and 3x
BUSY = (10000, 9950)  # 0.5% at ten times the traffic


def _counter(phases: list[tuple[int, int]]) -> str:
    """A counter at 0 at t=0 that grows by `per_step` at each of the next `steps` samples, phase by phase."""
    parts, value = [], 0
    for i, (steps, per_step) in enumerate(phases):
        start = value if i == 0 else value + per_step
        parts.append(f"{start}+{per_step}x{steps if i == 0 else steps - 1}")
        value += steps * per_step
    return " ".join(parts)


def _histogram(
    sli: str, engine: dict[str, str], phases: list[tuple[int, tuple[int, int]]]
) -> list[dict[str, str]]:
    """The SLI's histogram as servescope re-exports vLLM's: the bound's bucket (good), le="+Inf", _count."""
    metric = SLIS[sli][0]
    total = _counter([(steps, requests) for steps, (requests, _) in phases])
    good = _counter([(steps, under) for steps, (_, under) in phases])
    return [
        series(f"{metric}_bucket", {**engine, "le": BOUND[sli]}, good),
        series(f"{metric}_bucket", {**engine, "le": "+Inf"}, total),
        series(f"{metric}_count", engine, total),
    ]


def _record(sli: str, window: str) -> str:
    return f"model:servescope_{sli}_slo_errors:ratio_rate{window}"


def _ratios(sli: str, model: str, at: str, **windows: float) -> list[dict[str, Any]]:
    """promql_expr_test entries: the recorded error ratio of each window (`w1h=...`), rounded to 0.0001."""
    return [
        {
            "expr": f'round({_record(sli, window[1:])}{{model_name="{model}"}}, 0.0001)',
            "eval_time": at,
            "exp_samples": [{"labels": f'{{model_name="{model}"}}', "value": value}],
        }
        for window, value in windows.items()
    ]


def _pending(alert: str, model: str, at: str, state: str = "pending") -> dict[str, Any]:
    """The alert is pending for `model` (its condition holds, `for` has not elapsed) and for nobody else;
    with state="firing", firing (kept firing after its condition ended, annotations as they were)."""
    severity = "critical" if alert.endswith("Fast") else "warning"
    labels = f'alertname="{alert}",alertstate="{state}",bundle="servescope",model_name="{model}",'
    labels += f'severity="{severity}"'
    return {
        "expr": f'ALERTS{{alertname="{alert}"}}',
        "eval_time": at,
        "exp_samples": [{"labels": f"ALERTS{{{labels}}}", "value": 1}],
    }


def _burn(alert: str, model: str, pct: str) -> dict[str, Any]:
    sli = "ttft" if alert.startswith("ServescopeTtft") else "e2e"
    words = SLIS[sli][2]
    start = f"{model}: {pct} of requests miss the {words} objective {OBJECTIVE[sli]}"
    if alert.endswith("Fast"):
        return firing(
            alert, {"model_name": model}, f"{start}; at this rate the 30-day budget is gone in under 5 days."
        )
    return firing(alert, {"model_name": model}, f"{start} over days: the budget will not last the month.")


def _burn_series(
    first: list[tuple[int, tuple[int, int]]], second: list[tuple[int, tuple[int, int]]], steps: int
) -> list[dict[str, str]]:
    """Per SLI: one model on `first`, another on `second` (swapped between the SLIs), llama at the base."""
    inputs: list[dict[str, str]] = []
    for sli, on_first, on_second in (("ttft", DEEPSEEK, QWEN), ("e2e", QWEN, DEEPSEEK)):
        inputs += (
            _histogram(sli, on_first, first)
            + _histogram(sli, on_second, second)
            + _histogram(sli, LLAMA, [(steps, BASE)])
        )
    return inputs


# --- fast burn (page, for 2m): 1 min samples and evaluations, 252 min -----------------------------------
# S14 (the 14.4x pair alone): 0.5% to 180m, 20% from 181m to 245m, 0.5% after. Errors per minute: 5, 200.
S14 = [(180, BASE), (65, BURST), (7, BASE)]
# S6 (the 6x pair alone): 7% from the start to 60m, 0.5% after. Errors per minute: 70, 5.
S6 = [(60, MID), (192, BASE)]
FAST_STEPS = 252


def fast_burn() -> dict[str, Any]:
    checks, exprs = [], []
    for sli, s14, s6 in (("ttft", "deepseek", "qwen"), ("e2e", "qwen", "deepseek")):
        alert = f"Servescope{SLIS[sli][1]}SloBurnFast"
        checks += [
            # S6 from the first evaluation: 5m = 30m = 1h = 6h = 7%; true at 1m, pending at 2m either way.
            check(alert, "2m"),
            check(alert, "30m", _burn(alert, s6, "7%")),
            # 68m, 8 min after S6 ended: 30m (5-rate sum over the 31 records 38m..68m: 23 of 5 minutes at 70
            # errors, then 4 + 3 + 2 + 1 more minutes at 70, the other 30 minutes at 5) =
            # (125*70 + 30*5) / 155000 = 5.74% < 6%, while 6h = 6.41% still burns: the short window ends the
            # condition (from 67m); keep_firing_for 15m holds the page (below), which resolves from 82m.
            check(alert, "84m"),
            # S14 at 180m + b: the 5-rate sum of 1h is over 14.4% from b = 46 (14.57%); b = 45 gives 14.25%.
            check(alert, "225m"),
            check(alert, "227m"),  # pending since 226m (or 227m)
            check(alert, "245m", _burn(alert, s14, "20%")),  # 1h all at 20% at 244m and 245m
            # 251m: 5m = 0.5% ends the condition although 1h = (54*200 + 6*5) / 60000 = 18.05%; kept
            # firing for 15m (below), the page resolves from 266m.
            check(alert, "268m"),
        ]
        exprs += [
            _pending(alert, s6, "2m"),
            # A burn that dips under its rate within keep_firing_for (15m) is one page: still firing.
            _pending(alert, s6, "68m", "firing"),
            _pending(alert, s6, "80m", "firing"),
            _pending(alert, s14, "251m", "firing"),
            # 30m: 1h at 7% < 14.4%, so only the 6x pair matches.
            *_ratios(sli, s6, "30m", w5m=0.07, w30m=0.07, w1h=0.07, w6h=0.07),
            *_ratios(sli, s6, "68m", w30m=0.0574, w6h=0.0641),
            _pending(alert, s14, "227m"),
            # 245m: 6h (all 245 min; the first 4 records hold fewer minutes) = 5.56% < 6%: only the 14.4x
            # pair matches.
            *_ratios(sli, s14, "245m", w5m=0.2, w30m=0.2, w1h=0.2, w6h=0.0556),
            *_ratios(sli, s14, "251m", w5m=0.005, w1h=0.1872),
            *_ratios(sli, "llama", f"{FAST_STEPS}m", **{f"w{w}": 0.005 for w in WINDOWS}),
        ]
    return {
        "name": "SLO fast burn: 14.4x pair (1h & 5m) and 6x pair (6h & 30m)",
        "interval": "1m",
        "input_series": _burn_series(S14, S6, FAST_STEPS),
        "alert_rule_test": checks,
        "promql_expr_test": exprs,
    }


# --- slow burn (ticket, for 15m): 5 min samples and evaluations, 2470 min (41 h) ------------------------
# S3 (the 3x pair alone): 0.5% at ten times the traffic for 16 h (192 steps), 4% for 24h10m (290 steps, to
# 2410m), 0.5% after. Errors per step: 50 (of 10000), 40, 5. With steady traffic a 1d ratio over 3% would
# drag the 3d ratio over 1% too; the busy hours before keep it under, so the 3x pair fires on its own.
S3 = [(192, BUSY), (290, SLOW_MID), (12, BASE)]
# S1 (the 1x pair alone): 1.5% for 10 h (120 steps), 0.5% after. Errors per step: 15, 5.
S1 = [(120, LOW), (374, BASE)]
SLOW_STEPS = 494


def slow_burn() -> dict[str, Any]:
    checks, exprs = [], []
    for sli, s3, s1 in (("ttft", "deepseek", "qwen"), ("e2e", "qwen", "deepseek")):
        alert = f"Servescope{SLIS[sli][1]}SloBurnSlow"
        checks += [
            # S1 from the first evaluation: 2h = 6h = 1d = 3d = 1.5%; true at 5m, pending at 10m either way.
            check(alert, "10m"),
            check(alert, "400m", _burn(alert, s1, "1.5%")),
            # 900m, 60 steps after S1 ended: 6h (73 records of one step each, 540m..900m) =
            # (13*15 + 60*5) / 73000 = 0.68% < 1% ends the ticket, while 3d (all 180 steps) =
            # (120*15 + 60*5) / 180000 = 1.17% still burns.
            check(alert, "900m"),
            # S3 at step 192 + b: 1d (289 records) = (50(289 - b) + 40b) / (10000(289 - b) + 1000b) > 3%
            # from b = 278 (260b > 72250), at 2350m; b = 277 gives 11680 / 397000 = 2.94%.
            check(alert, "2345m"),
            check(alert, "2355m"),  # pending since 2350m (or 2355m)
            check(alert, "2410m", _burn(alert, s3, "4%")),  # 1d all at 4% at 2405m and 2410m
            # 2470m: 2h (25 records) = (13*40 + 12*5) / 25000 = 2.32% < 3% ends the ticket although
            # 1d (289 records) = (277*40 + 12*5) / 289000 = 3.85%.
            check(alert, "2470m"),
        ]
        exprs += [
            _pending(alert, s1, "10m"),
            # 400m: 1d at 1.5% < 3%, so only the 1x pair matches.
            *_ratios(sli, s1, "400m", w2h=0.015, w6h=0.015, w1d=0.015, w3d=0.015),
            *_ratios(sli, s1, "900m", w6h=0.0068, w3d=0.0117),
            _pending(alert, s3, "2355m"),
            # 2410m: 3d (all 482 steps) = (192*50 + 290*40) / (192*10000 + 290*1000) = 21200 / 2210000 = 0.96%
            # < 1%: only the 3x pair matches.
            *_ratios(sli, s3, "2410m", w2h=0.04, w6h=0.04, w1d=0.04, w3d=0.0096),
            *_ratios(sli, s3, "2470m", w2h=0.0232, w1d=0.0385),
            *_ratios(sli, "llama", f"{SLOW_STEPS * 5}m", **{f"w{w}": 0.005 for w in WINDOWS}),
        ]
    return {
        "name": "SLO slow burn: 3x pair (1d & 2h) and 1x pair (3d & 6h)",
        "interval": "5m",
        "input_series": _burn_series(S3, S1, SLOW_STEPS),
        "alert_rule_test": checks,
        "promql_expr_test": exprs,
    }


# --- P99 TTFT (for 10m, 5m window): 1 min samples --------------------------------------------------------
P99 = "ServescopeTtftP99High"
TTFT = SLIS["ttft"][0]
# Per minute: requests under 0.25 s, 0.5 s, 1 s, and all of them.
FAST_REPLIES = (100, 100, 100, 100)  # P99 = 0.99 * 0.25 s = 0.2475 s
# 10 of 100 between 0.5 s and 1 s: P99 = 0.5 + 0.5 * (99 - 90) / 10 = 0.95 s
SLOW_REPLIES = (50, 90, 100, 100)


def _ttft_buckets(phases: list[tuple[int, tuple[int, int, int, int]]]) -> list[dict[str, str]]:
    les = ("0.25", "0.5", "1.0", "+Inf")
    out = [
        series(f"{TTFT}_bucket", {**DEEPSEEK, "le": le}, _counter([(steps, per[i]) for steps, per in phases]))
        for i, le in enumerate(les)
    ]
    return [*out, series(f"{TTFT}_count", DEEPSEEK, _counter([(steps, per[3]) for steps, per in phases]))]


P99_HIGH = {
    "name": P99,
    "interval": "1m",
    # fast to 10m, slow from 11m to 30m, fast after
    "input_series": _ttft_buckets([(10, FAST_REPLIES), (20, SLOW_REPLIES), (10, FAST_REPLIES)]),
    "alert_rule_test": [
        check(P99, "10m"),  # P99 0.2475 s
        # 11m: 4 fast minutes and a slow one in the window: 450/490/500/500, rank 495 -> 0.5 + 0.5 * 5/10 s.
        check(P99, "20m"),  # pending since 11m, `for: 10m`
        check(
            P99,
            "25m",
            firing(
                P99,
                {"model_name": "deepseek"},
                "deepseek: P99 time to first token is 950ms (threshold 0.5 s).",
            ),
        ),
        check(P99, "36m"),  # recovered: the 5m window holds fast minutes only since 35m
    ],
    "promql_expr_test": [_pending(P99, "deepseek", "20m")],
}

# --- mixed bucket layouts (for 30m): one model, a vLLM endpoint and an SGLang one, every request fast ----
# SGLang's TTFT buckets skip 0.5 (... 0.4, 0.6 ...): dividing by both endpoints' counts read as "50% slow"
# and paged. Only the endpoint with the bound counts; the other is named by ServescopeSloBucketMissing.
MISSING = "ServescopeSloBucketMissing"
VLLM_EP = {**ENGINE, "model_name": "mixed", "endpoint": "http://10.0.0.7:8000/metrics"}
SGLANG_EP = {**ENGINE, "model_name": "mixed", "engine": "1", "endpoint": "http://10.0.0.8:30000/metrics"}


def _sglang_ttft(steps: int) -> list[dict[str, str]]:
    metric = SLIS["ttft"][0]
    every = _counter([(steps, 100)])
    buckets = [series(f"{metric}_bucket", {**SGLANG_EP, "le": le}, every) for le in ("0.4", "0.6", "+Inf")]
    return [*buckets, series(f"{metric}_count", SGLANG_EP, every)]


MIXED_STEPS = 40
MIXED = {
    "name": f"SLO over mixed bucket layouts, {MISSING}",
    "interval": "1m",
    "input_series": [
        *_histogram("ttft", VLLM_EP, [(MIXED_STEPS, (100, 100))]),
        *_histogram("e2e", VLLM_EP, [(MIXED_STEPS, (100, 100))]),
        *_sglang_ttft(MIXED_STEPS),
        *_histogram("e2e", SGLANG_EP, [(MIXED_STEPS, (100, 100))]),
    ],
    "alert_rule_test": [
        check("ServescopeTtftSloBurnFast", "10m"),
        check("ServescopeTtftSloBurnFast", "35m"),
        # Summed with the SGLang buckets, vLLM's le="0.5" count fell back at 0.6: a P99 of 0.6 s paged.
        check(P99, "35m"),
        check(MISSING, "10m"),
        check(MISSING, "29m"),  # pending since 0m
        check(
            MISSING,
            "31m",
            firing(
                MISSING,
                {**SGLANG_EP, "sli": "ttft"},
                "mixed engine 1 at http://10.0.0.8:30000/metrics: its ttft histogram has no bucket at the "
                "SLO bound (time to first token 0.5 s, end-to-end latency 60.0 s), so the SLO alerts leave "
                "its requests out; set the bound to one of its buckets, or configure the engine's buckets.",
            ),
        ),
    ],
    # Every request under the bound: no error, however the endpoints' buckets are laid out.
    "promql_expr_test": _ratios("ttft", "mixed", "35m", w5m=0.0, w1h=0.0),
}

# --- P99 over mixed bucket layouts: each endpoint's P99 in its own layout, the model's slowest one ---------
# Summed, the layouts interleave (0.25 and 0.5 from vLLM, 0.4 and 0.6 from SGLang): with every request
# fast the sum reads 0.6 + 0.4 * 98/100 = 0.992 s and paged. Per endpoint: vLLM 0.99 * 0.25 = 0.2475 s,
# SGLang 0.99 * 0.4 = 0.396 s. From 20m SGLang turns slow: 20 of 100 over 0.6 s, P99 = 0.6 + 0.4 * 19/20.
P99_VLLM = {**VLLM_EP, "model_name": "split"}
P99_SGLANG = {**SGLANG_EP, "model_name": "split"}


def _layout(
    labels: dict[str, str], les: tuple[str, ...], phases: list[tuple[int, tuple[int, ...]]]
) -> list[dict[str, str]]:
    """A TTFT histogram of `labels` with bounds `les` (the last +Inf): (steps, cumulative counts) phases."""
    return [
        *(
            series(
                f"{TTFT}_bucket", {**labels, "le": le}, _counter([(steps, per[i]) for steps, per in phases])
            )
            for i, le in enumerate(les)
        ),
        series(f"{TTFT}_count", labels, _counter([(steps, per[-1]) for steps, per in phases])),
    ]


P99_MIXED = {
    "name": f"{P99} over mixed bucket layouts",
    "interval": "1m",
    "input_series": [
        *_layout(P99_VLLM, ("0.25", "0.5", "1.0", "+Inf"), [(45, FAST_REPLIES)]),
        *_layout(
            P99_SGLANG, ("0.4", "0.6", "1.0", "+Inf"), [(20, (100, 100, 100, 100)), (25, (50, 80, 100, 100))]
        ),
    ],
    "alert_rule_test": [
        check(P99, "15m"),  # every request fast: nothing pending either (the sum would read 0.992 s)
        check(P99, "19m"),
        check(
            P99,
            "40m",
            firing(
                P99, {"model_name": "split"}, "split: P99 time to first token is 980ms (threshold 0.5 s)."
            ),
        ),
    ],
    "promql_expr_test": [
        {"expr": f'ALERTS{{alertname="{P99}"}}', "eval_time": "19m", "exp_samples": []},
        _pending(P99, "split", "25m"),
    ],
}

FAST_CASES = [fast_burn(), P99_HIGH, MIXED, P99_MIXED]
SLOW_CASES = [slow_burn()]
CASES = FAST_CASES + SLOW_CASES


@pytest.mark.e2e
def test_slo_fast_burn_and_p99(tmp_path: Path) -> None:
    run_promtool(FAST_CASES, tmp_path, evaluation_interval="1m")


@pytest.mark.e2e
def test_slo_slow_burn(tmp_path: Path) -> None:
    run_promtool(SLOW_CASES, tmp_path, evaluation_interval="5m")
