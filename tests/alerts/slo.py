"""The models, SLIs and histogram series of the SLO alert cases, and the PromQL checks of their records."""

from __future__ import annotations

from typing import Any

from tests.alerts.promtool import ENGINE, series

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


def counter(phases: list[tuple[int, int]]) -> str:
    """A counter at 0 at t=0 that grows by `per_step` at each of the next `steps` samples, phase by phase."""
    parts, value = [], 0
    for i, (steps, per_step) in enumerate(phases):
        start = value if i == 0 else value + per_step
        parts.append(f"{start}+{per_step}x{steps if i == 0 else steps - 1}")
        value += steps * per_step
    return " ".join(parts)


def histogram(
    sli: str, engine: dict[str, str], phases: list[tuple[int, tuple[int, int]]]
) -> list[dict[str, str]]:
    """The SLI's histogram as servescope re-exports vLLM's: the bound's bucket (good), le="+Inf", _count."""
    metric = SLIS[sli][0]
    total = counter([(steps, requests) for steps, (requests, _) in phases])
    good = counter([(steps, under) for steps, (_, under) in phases])
    return [
        series(f"{metric}_bucket", {**engine, "le": BOUND[sli]}, good),
        series(f"{metric}_bucket", {**engine, "le": "+Inf"}, total),
        series(f"{metric}_count", engine, total),
    ]


def record(sli: str, window: str) -> str:
    return f"model:servescope_{sli}_slo_errors:ratio_rate{window}"


def ratios(sli: str, model: str, at: str, **windows: float) -> list[dict[str, Any]]:
    """promql_expr_test entries: the recorded error ratio of each window (`w1h=...`), rounded to 0.0001."""
    return [
        {
            "expr": f'round({record(sli, window[1:])}{{model_name="{model}"}}, 0.0001)',
            "eval_time": at,
            "exp_samples": [{"labels": f'{{model_name="{model}"}}', "value": value}],
        }
        for window, value in windows.items()
    ]


def alert_state(alert: str, model: str, at: str, state: str = "pending") -> dict[str, Any]:
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


def ttft_layout(
    labels: dict[str, str], les: tuple[str, ...], phases: list[tuple[int, tuple[int, ...]]]
) -> list[dict[str, str]]:
    """A TTFT histogram of `labels` with bounds `les` (the last +Inf): (steps, cumulative counts) phases."""
    metric = SLIS["ttft"][0]
    return [
        *(
            series(
                f"{metric}_bucket", {**labels, "le": le}, counter([(steps, per[i]) for steps, per in phases])
            )
            for i, le in enumerate(les)
        ),
        series(f"{metric}_count", labels, counter([(steps, per[-1]) for steps, per in phases])),
    ]
