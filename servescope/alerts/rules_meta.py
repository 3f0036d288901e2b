"""Alerts about the monitoring itself: the watchdog, targets and sources down, absent series."""

from __future__ import annotations

from servescope import catalog as c
from servescope.alerts.config import AlertsConfig
from servescope.alerts.model import Alert, Group, sel
from servescope.catalog import derived as dm


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
    endpoint_up = sel(cfg, c.SOURCE_UP.name, 'endpoint!=""')
    return Group(
        "servescope-meta",
        (
            Alert(
                "Watchdog",
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
                "critical",
                "Prometheus cannot scrape a servescope exporter.",
                "{{ $labels.instance }} has been down for " + cfg.exporter_down_for + ": every GPU and "
                "serving alert of that node is blind.",
                ("instance", "job"),
                "exporter",
            ),
            Alert(
                "ServescopeSourceDown",
                f"{source_up} == 0",
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
                "ServescopeServingEndpointDown",
                f"{endpoint_up} == 0",
                cfg.source_down_for,
                "warning",
                "A serving endpoint stopped answering its /metrics.",
                "{{ $labels.endpoint }} on {{ $labels.instance }} has not answered for "
                + cfg.source_down_for
                + ": the engine is down or hung.",
                ("instance", "endpoint"),
                "exporter",
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
        ),
    )
