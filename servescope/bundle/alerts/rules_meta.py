"""Alerts about the monitoring itself: the watchdog, targets and sources down, absent series."""

from __future__ import annotations

from servescope.bundle.alerts.model import WATCHDOG, Alert, Group
from servescope.bundle.alerts.rules_availability import ANSWERING, models, planned, planned_on
from servescope.bundle.alerts.rules_blind import blindness
from servescope.core import catalog as c
from servescope.core.catalog import derived as dm
from servescope.core.catalog.placement import ENDPOINT_POD_INFO
from servescope.core.config import AlertsConfig
from servescope.core.topology import podmonitor, sel


def endpoint_down(cfg: AlertsConfig) -> str:
    """Endpoints that should serve and answered less than half of endpoint_down_window (rules_availability),
    with their model: a crash loop that answers for a minute between its crashes is down, as a dead engine.

    In the exporter topology, an endpoint without a pod the kubelet named (no Kubernetes, or a GPU shared
    by several pods) is kept down by the exporter for 900 s after its last success, then dropped: an engine
    that stays dead would resolve the alert. Such a forgotten endpoint whose last value was 0 keeps it,
    for endpoint_forgotten_window, unless the node has as many healthy endpoints again as at its best
    within that window (the engine came back at another address). An endpoint whose pod the kubelet named
    is never forgotten while down: the exporter drops it when its pod is gone, which is no failure.
    """
    down = f"avg_over_time({ANSWERING}[{cfg.endpoint_down_window}]) < 0.5"
    if cfg.kube_state_metrics:
        # A pod deleted within the window stopped on purpose, though kube-state-metrics said so late.
        down = f"({down} unless {planned_on(cfg)} {planned(cfg, cfg.endpoint_down_window)})"
    if podmonitor(cfg):
        return down
    up = sel(cfg, c.SOURCE_UP.name, 'endpoint!=""')
    w = cfg.endpoint_forgotten_window
    healthy = f"count by (instance) ({up} == 1)"
    replaced = f"{healthy} >= max_over_time(({healthy})[{w}:5m])"
    attributed = f"last_over_time({sel(cfg, ENDPOINT_POD_INFO.name)}[{w}])"
    forgotten = (
        f"last_over_time({up}[{w}]) == 0 unless on (instance, endpoint) {up}"
        f" unless on (instance, endpoint) {attributed} unless on (instance) ({replaced})"
    )
    named = f"0 * {models(cfg)} and on (job, instance, endpoint) ({forgotten})"
    return f"{down} or max by (job, instance, endpoint, model_name) ({named})"


def source_stale(cfg: AlertsConfig) -> str:
    """Sources whose last success, at the scrape, is older than source_stale_intervals intervals.

    A hung call (NVML around an XID 79) keeps the source's last values and `source_up 1`. The age is
    taken at the scrape (timestamp()), not at evaluation, so the scrape interval does not count in it.
    """
    last = sel(cfg, c.SOURCE_LAST_SUCCESS.name, 'endpoint=""')
    interval = sel(cfg, c.SOURCE_INTERVAL.name)
    up = sel(cfg, c.SOURCE_UP.name, 'endpoint=""')
    on = "on (job, instance, source)"
    bound = f"clamp_min({cfg.source_stale_intervals:g} * {interval}, {cfg.source_stale_min_seconds:g})"
    return f"(timestamp({last}) - {last}) > {on} {bound} and {on} {last} > 0 and {on} {up} == 1"


def meta(cfg: AlertsConfig) -> Group:
    # One declarative list of the group's alerts, read top to bottom as the bundle's reference: longer than
    # 40 lines on purpose.
    absent = (
        ("ServescopeGpuMetricsAbsent", c.GPU_UP.name, "GPU"),
        ("ServescopeServingMetricsAbsent", c.KV_USAGE.name, "serving-engine"),
        ("ServescopeDerivedMetricsAbsent", dm.LEAK_SUSPECTED.name, "derived memory"),
    )
    # Sources are exported without an endpoint label; each vLLM endpoint with one.
    source_up = sel(cfg, c.SOURCE_UP.name, 'endpoint=""')
    return Group(
        "servescope-meta",
        (
            Alert(
                WATCHDOG,
                "vector(1)",
                "0m",
                "info",
                "Always firing: proves the alerting pipeline works end to end.",
                "This alert always fires. Route it to a dead man's switch; if it stops arriving, "
                "Prometheus or Alertmanager is broken.",
            ),
            Alert(
                "ServescopeExporterDown",
                f"up{{{cfg.selector}}} == 0",
                cfg.exporter_down_for,
                # A warning, as kube-prometheus's TargetDown: the node's GPUs may serve well meanwhile.
                "warning",
                "Prometheus cannot scrape a servescope exporter.",
                "{{ $labels.instance }} has been down for " + cfg.exporter_down_for + ": every GPU and "
                "serving alert of that node is blind.",
                ("instance", "job"),
                "exporter",
            ),
            Alert(
                "ServescopeSourceDown",
                # Not installed on this node (servescope_source_absent) is a state, not a failure.
                f"{source_up} == 0 unless on (job, instance, source) {sel(cfg, c.SOURCE_ABSENT.name)} == 1",
                cfg.source_down_for,
                "warning",
                "A servescope source keeps failing.",
                "Source {{ $labels.source }} on {{ $labels.instance }} is down; /api/v1/sources on "
                "the exporter "
                "and servescope_source_errors_total say why.",
                ("instance", "source"),
                "exporter",
            ),
            Alert(
                "ServescopeSourceStale",
                source_stale(cfg),
                cfg.source_down_for,
                "warning",
                "A servescope source stopped collecting while it reports up.",
                "Source {{ $labels.source }} on {{ $labels.instance }} last succeeded "
                "{{ $value | humanizeDuration }} before the scrape, more than "
                f"{cfg.source_stale_intervals:g} intervals: a call hangs (NVML around an XID 79, dcgmi) and "
                "its series keep their last values.",
                ("instance", "source"),
                "exporter",
            ),
            Alert(
                "ServescopeServingEndpointDown",
                endpoint_down(cfg),
                cfg.endpoint_down_for,
                "warning",
                "A serving endpoint that should serve does not answer its /metrics.",
                "{{ $labels.model_name }} endpoint {{ $labels.endpoint }} on {{ $labels.instance }} answered "
                f"less than half the time over {cfg.endpoint_down_window}, for {cfg.endpoint_down_for}, "
                "while its pod is neither gone nor being deleted: the engine crashed, crash-loops or hangs.",
                ("instance", "endpoint", "model_name"),
                "exporter",
                keep_firing_for=cfg.page_gap_tolerance,
            ),
            *(
                Alert(
                    name,
                    f"absent({sel(cfg, metric)})",
                    cfg.absent_for,
                    "warning",
                    f"No {what} series from any servescope exporter.",
                    f"{metric} is absent: the alerts built on it cannot fire. Check the scrape "
                    f"configuration ({cfg.selector}) and the exporters' sources.",
                    (),
                    "exporter",
                )
                for name, metric, what in absent
            ),
            *blindness(cfg),
        ),
    )
