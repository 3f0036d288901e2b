"""Serving availability: which endpoints should serve, which of them do not, and the page when a model's
share of such endpoints burns its availability budget.

An endpoint should serve when the engine behind it answered for a model (within the last six hours) and
Kubernetes has not removed it: the exporter drops an endpoint whose pod is gone at once (the kubelet no
longer lists the pod), Prometheus drops a PodMonitor target whose pod is gone, and a pod being deleted
(kube-state-metrics' deletion timestamp) stops on purpose. A pod that never answered is loading its
model. kube-state-metrics says a pod is being deleted a scrape after its engine stopped: the model's
share is judged planned_change_lag late, once it has. What is left and does not answer (a crash loop, a
dead engine whose pod stays) or answers and makes no progress (a hung scheduler) is unavailable. A
rollout, a scale-down or a move to another node leaves nothing unavailable.
"""

from __future__ import annotations

from servescope.bundle.alerts.exprs import ENGINE_BY
from servescope.bundle.alerts.kube import terminating
from servescope.bundle.alerts.model import Alert, Group, Record, record_name
from servescope.bundle.alerts.rules_slo import PAGE
from servescope.core import catalog as c
from servescope.core.config import AlertsConfig
from servescope.core.topology import podmonitor, sel

ANSWERING = record_name("endpoint", "serving_answering", "bool")
SERVING = record_name("endpoint", "serving_available", "bool")
UNAVAILABLE = record_name("model", "availability_errors", "ratio")
# How long an endpoint that stopped answering stays attributed to the model it served, read every minute.
MODEL_MEMORY, MODEL_STEP = "6h", "1m"
POD_TARGET = "instance, namespace, pod, endpoint"


def endpoint_keys(cfg: AlertsConfig) -> str:
    """The labels of an endpoint: its pod too in the PodMonitor topology (the target carries it), the
    exporter's job in the exporter's (the exporter that reports it: an exporter down explains it)."""
    return POD_TARGET if podmonitor(cfg) else "job, instance, endpoint"


def health(cfg: AlertsConfig) -> str:
    """1 or 0 per endpoint, for every endpoint there is: the exporter's verdict, or Prometheus' `up` of
    an engine it scrapes itself.

    In the exporter topology an exporter that answers and lists no longer an endpoint is the evidence it
    is gone; while the exporter itself is not scraped, its endpoints keep their last value for
    page_gap_tolerance (a gap in the scrapes is no news about the engines).
    """
    if podmonitor(cfg):
        return f"up{{{cfg.engine_selector}}}"
    up = sel(cfg, c.SOURCE_UP.name, 'source="vllm"', 'endpoint!=""')
    answering = f"up{{{cfg.selector}}} == 1"
    return f"({up} or (last_over_time({up}[{cfg.page_gap_tolerance}]) unless on (instance) {answering}))"


def models(cfg: AlertsConfig) -> str:
    """The model each endpoint served within MODEL_MEMORY (value 1), looked at every MODEL_STEP: an
    endpoint that never answered has none, and counts nowhere (its engine is still loading).

    Each step reads the whole MODEL_STEP before it, not the instant: a crash-looping engine answers
    seconds at a time (a failed scrape marks its series stale at once), and an instant on the minute
    would rarely land in one of those seconds."""
    running = f"last_over_time({sel(cfg, c.RUNNING.name)}[{MODEL_STEP}])"
    served = f"group by ({endpoint_keys(cfg)}, model_name) ({running})"
    recent = f"last_over_time(({served})[{MODEL_MEMORY}:{MODEL_STEP}])"
    return f"group by ({endpoint_keys(cfg)}, model_name) ({recent})"


def planned(cfg: AlertsConfig, within: str) -> str:
    """Endpoints whose pod was being deleted at any time `within` (kube-state-metrics): they stop on
    purpose. Keyed by (namespace, pod) in the PodMonitor topology, by (instance, endpoint) in the
    exporter's (the pod it named for the endpoint)."""
    if podmonitor(cfg):
        return terminating(cfg, within)
    pods = f"last_over_time({sel(cfg, 'servescope_serving_endpoint_pod_info')}[{within}])"
    return f"({pods} * on (namespace, pod) group_left () {terminating(cfg, within)})"


def planned_on(cfg: AlertsConfig) -> str:
    return "on (namespace, pod)" if podmonitor(cfg) else "on (instance, endpoint)"


def answering(cfg: AlertsConfig) -> str:
    """1 (answers) or 0 (does not) per endpoint that should serve, with its model_name."""
    keys = endpoint_keys(cfg)
    should = health(cfg)
    if cfg.kube_state_metrics:
        should = f"({should} unless {planned_on(cfg)} {planned(cfg, cfg.planned_change_lag)})"
    # `and` rather than a one-to-one join: a server that serves two models is two series, not an error.
    named = models(cfg)
    up, down = f"{named} and on ({keys}) {should} == 1", f"0 * {named} and on ({keys}) {should} == 0"
    return f"max by ({keys}, model_name) ({up} or {down})"


def stuck(cfg: AlertsConfig) -> str:
    """Engines with requests running that generated no token over scheduler_stuck_window: the scheduler
    hangs (vLLM refreshes its gauges on steps only, so they look healthy)."""
    running, generated = sel(cfg, c.RUNNING.name), sel(cfg, c.GENERATION_TOKENS.name)
    w = cfg.scheduler_stuck_window
    return f"{running} > 0 and on ({ENGINE_BY}) increase({generated}[{w}]) == 0"


def unavailable(cfg: AlertsConfig) -> str:
    """Each model's share of endpoints that should serve and do not. With kube-state-metrics it is the
    share planned_change_lag ago, leaving out the pods whose deletion it said since: an engine stops
    (SIGTERM) as its pod is deleted, and kube-state-metrics says so a scrape later."""
    if not cfg.kube_state_metrics:
        return f"1 - avg by (model_name) ({SERVING})"
    lag = cfg.planned_change_lag
    return f"1 - avg by (model_name) ({SERVING} offset {lag} unless {planned_on(cfg)} {planned(cfg, lag)})"


def records(cfg: AlertsConfig) -> Group:
    """Each endpoint's answer, its availability (answering and not hung), each model's unavailable share."""
    keys = endpoint_keys(cfg)
    hung = f"group by ({keys}) ({stuck(cfg)})"
    return Group(
        "servescope-availability-records",
        (
            Record(ANSWERING, answering(cfg)),
            Record(SERVING, f"(0 * {ANSWERING} and on ({keys}) {hung}) or {ANSWERING}"),
            Record(UNAVAILABLE, unavailable(cfg)),
        ),
    )


def burn(cfg: AlertsConfig) -> str:
    """Models whose unavailable share burns the availability budget at a paging rate over both windows
    of a pair (the value is the long window's share)."""
    budget = 1 - cfg.availability_objective
    return " or ".join(
        f"(avg_over_time({UNAVAILABLE}[{long}]) > {factor:g} * {budget:g}"
        f" and avg_over_time({UNAVAILABLE}[{short}]) > {factor:g} * {budget:g})"
        for factor, long, short in PAGE
    )


def page(cfg: AlertsConfig) -> Alert:
    return Alert(
        "ServescopeAvailabilitySloBurnFast",
        burn(cfg),
        cfg.slo_fast_for,
        "critical",
        "A model's endpoints that should serve do not, fast enough to burn its availability budget.",
        "{{ $labels.model_name }}: {{ $value | humanizePercentage }} of the time its endpoints that should "
        f"serve did not answer or made no progress (objective {cfg.availability_objective:.2%}); at this "
        "rate the 30-day budget is gone in under 5 days. The endpoints' ServescopeServingEndpointDown and "
        "ServescopeSchedulerStuck tickets, muted under this page, say which.",
        ("model_name",),
        "serving",
        keep_firing_for=cfg.slo_fast_keep_firing_for,
    )
