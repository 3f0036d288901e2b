"""Engine liveness alerts: a hung scheduler, a restart loop, failing requests, endpoints missing."""

from __future__ import annotations

from servescope.bundle.alerts.exprs import BASELINE_MIN_AGE, ENGINE_BY, ON_ENGINE
from servescope.bundle.alerts.kube import MODEL_DEPLOYMENTS, model_deployments, model_replicas_unavailable
from servescope.bundle.alerts.model import ENGINE_KEYS, Alert, Group, Record
from servescope.bundle.alerts.rules_availability import stuck
from servescope.core import catalog as c
from servescope.core.config import AlertsConfig
from servescope.core.topology import sel

ENDPOINTS = "model:servescope_serving_endpoints:count"
FAILED_REASONS = "abort|error"


def endpoint_records(cfg: AlertsConfig) -> Group:
    """Healthy endpoints per model (those that answered their last scrape export their KV usage) and,
    with kube-state-metrics, the Deployments that run each model's pods."""
    kv = sel(cfg, c.KV_USAGE.name)
    rules = [Record(ENDPOINTS, f"count by (model_name) ({kv})")]
    if cfg.kube_state_metrics:
        rules.append(Record(MODEL_DEPLOYMENTS, model_deployments(cfg, kv)))
    return Group("servescope-engine-records", tuple(rules))


def _endpoints_below_norm(cfg: AlertsConfig) -> str:
    """Fewer endpoints than endpoints_ratio of the day's median; with kube-state-metrics, only while the
    model's Deployments miss replicas they want: a scale-down lowers what they want, and is no failure."""
    median = f"quantile_over_time(0.5, {ENDPOINTS}[1d])"
    # A model whose every endpoint died has no count at all: it reads as 0.
    now = f"({ENDPOINTS} or on (model_name) 0 * {median})"
    below = (
        f"{now} < {cfg.endpoints_ratio:g} * {median}"
        f" and on (model_name) {ENDPOINTS} offset {BASELINE_MIN_AGE}"
    )
    if not cfg.kube_state_metrics:
        return below
    return f"{below} and on (model_name) {model_replicas_unavailable(cfg)} > 0"


def _request_errors(cfg: AlertsConfig) -> str:
    """Engines whose share of failed requests is over request_error_ratio, where enough finish to judge."""

    def per_engine(finished: str) -> str:
        return f"sum by ({ENGINE_BY}) (rate({finished}[5m]))"

    every = per_engine(sel(cfg, c.REQUESTS_FINISHED.name))
    failed = per_engine(sel(cfg, c.REQUESTS_FINISHED.name, f'finished_reason=~"{FAILED_REASONS}"'))
    return (
        f"{failed} / {every} > {cfg.request_error_ratio:g}"
        f" and on ({ENGINE_BY}) {every} > {cfg.request_error_min_rate:g}"
    )


def engine(cfg: AlertsConfig) -> Group:
    # One tuple of rule declarations: long by nature, not by logic.
    prompt = sel(cfg, c.PROMPT_TOKENS.name)
    w = cfg.scheduler_stuck_window
    return Group(
        "servescope-engine",
        (
            Alert(
                "ServescopeSchedulerStuck",
                stuck(cfg),
                cfg.scheduler_stuck_for,
                # A ticket: the endpoint counts as unavailable, and the availability page says when that
                # hurts the model.
                "warning",
                "An engine has requests running and generates no tokens.",
                f"{ON_ENGINE} has {{{{ $value }}}} requests running and generated no token in {w}: its "
                "scheduler hangs (vLLM refreshes its gauges on engine steps only, so they look healthy).",
                ENGINE_KEYS,
                "serving",
            ),
            Alert(
                "ServescopeEngineRestartLoop",
                f"resets({prompt}[{cfg.restart_loop_window}]) >= {cfg.restart_loop_resets}",
                cfg.restart_loop_for,
                "warning",
                "An engine keeps restarting.",
                f"{ON_ENGINE} restarted {{{{ $value }}}} times in {cfg.restart_loop_window} (its counters "
                "went back to zero): it crashes under load or at start-up.",
                ENGINE_KEYS,
                "serving",
            ),
            Alert(
                "ServescopeRequestErrorsHigh",
                _request_errors(cfg),
                cfg.request_error_for,
                "warning",
                "An engine aborts or fails a large share of its requests.",
                f"{ON_ENGINE}: {{{{ $value | humanizePercentage }}}} of the requests it finished in 5m "
                f"ended in {FAILED_REASONS.replace('|', ' or ')} (bound {cfg.request_error_ratio:.0%}).",
                ENGINE_KEYS,
                "serving",
            ),
            Alert(
                "ServescopeHealthyEndpointsLow",
                _endpoints_below_norm(cfg),
                cfg.endpoints_for,
                "warning",
                "A model has fewer healthy endpoints than it usually has.",
                "{{ $labels.model_name }} has {{ $value }} endpoints answering, under "
                f"{cfg.endpoints_ratio:.0%} of its median of the last day: engines died and were not "
                "replaced, and requests no engine answers leave no latency sample to burn the SLO.",
                ("model_name",),
                "serving",
            ),
        ),
    )
