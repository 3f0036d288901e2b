"""The models, SLIs and histogram series of the SLO alert cases, the PromQL checks of their records, and
the burn cases built from them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.alerts.promtool import ENGINE, case, check, firing, series

DEEPSEEK = ENGINE
QWEN = {**ENGINE, "model_name": "qwen", "endpoint": "http://10.0.0.2:8000/metrics"}
LLAMA = {**ENGINE, "model_name": "llama", "endpoint": "http://10.0.0.3:8000/metrics"}
# ServescopeSloBucketMissing's description after the bounds.
MISSING_TAIL = (
    "so the SLO alerts count its requests from its nearest lower bucket (those between it and the bound "
    "count as misses: the burn is overestimated), or leave them out if it has none; set the bound to one of "
    "its buckets, or configure the engine's buckets."
)
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


# (requests, requests under the bound) per scrape interval.
BASE = (1000, 995)  # 0.5% errors: half the budget
Phases = list[tuple[int, tuple[int, int]]]
# Per SLI: the model that follows the late scenario of a burn case and the one that follows the early one
# (swapped between the SLIs, so an alert reading the wrong histogram fails).
MODELS = (("ttft", DEEPSEEK, QWEN), ("e2e", QWEN, DEEPSEEK))


def burn_firing(alert: str, model: str, pct: str) -> dict[str, Any]:
    """The burn alert `alert` firing for `model` with `pct` of its requests missing the objective."""
    sli = "ttft" if alert.startswith("ServescopeTtft") else "e2e"
    start = f"{model}: {pct} of requests miss the {SLIS[sli][2]} objective {OBJECTIVE[sli]}"
    if alert.endswith("Fast"):
        return firing(
            alert, {"model_name": model}, f"{start}; at this rate the 30-day budget is gone in under 5 days."
        )
    return firing(alert, {"model_name": model}, f"{start} over days: the budget will not last the month.")


@dataclass(frozen=True)
class Burn:
    """One scenario of a burn case: its error phases and when its alert and records are checked."""

    phases: Phases
    share: str  # the error share the description shows while it fires
    silent: tuple[str, ...]  # checked silent; ALERTS shows it pending at the last one
    firing: str
    ended: str  # silent again
    windows: dict[str, dict[str, float]]  # eval time: the recorded ratio of each window there (`w1h`)
    kept: tuple[str, ...] = ()  # ALERTS still firing after the condition ended

    def checks(self, alert: str, model: str) -> list[dict[str, Any]]:
        firing_check = check(alert, self.firing, burn_firing(alert, model, self.share))
        return [*(check(alert, at) for at in self.silent), firing_check, check(alert, self.ended)]

    def exprs(self, alert: str, sli: str, model: str) -> list[dict[str, Any]]:
        kept = [alert_state(alert, model, at, "firing") for at in self.kept]
        recorded = [entry for at, found in self.windows.items() for entry in ratios(sli, model, at, **found)]
        return [alert_state(alert, model, self.silent[-1]), *kept, *recorded]


def burn_case(name: str, speed: str, interval: str, steps: int, *, early: Burn, late: Burn) -> dict[str, Any]:
    """One promtool group for `Servescope<SLI>SloBurn<speed>` of both SLIs over `steps` samples: two models
    follow the early and the late scenario, llama stays at BASE (no burn alert may name it)."""
    inputs: list[dict[str, str]] = []
    checks: list[dict[str, Any]] = []
    exprs: list[dict[str, Any]] = []
    end = f"{steps * int(interval.removesuffix('m'))}m"
    for sli, on_late, on_early in MODELS:
        alert = f"Servescope{SLIS[sli][1]}SloBurn{speed}"
        inputs += histogram(sli, on_late, late.phases) + histogram(sli, on_early, early.phases)
        inputs += histogram(sli, LLAMA, [(steps, BASE)])
        late_model, early_model = on_late["model_name"], on_early["model_name"]
        checks += early.checks(alert, early_model) + late.checks(alert, late_model)
        exprs += early.exprs(alert, sli, early_model) + late.exprs(alert, sli, late_model)
        exprs += ratios(sli, "llama", end, **{f"w{w}": 0.005 for w in WINDOWS})
    return case(name, inputs, *checks, interval=interval, exprs=exprs)
