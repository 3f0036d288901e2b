"""servescope health: is the exporter itself collecting? Sources up, durations, errors, staleness."""

from __future__ import annotations

import grafanalib.core as g

from servescope.bundle.dashboards.common import count_stat, make_dashboard, stat, ts
from servescope.core.config import AlertsConfig


def dashboard(cfg: AlertsConfig) -> g.Dashboard:
    """The dashboard, its thresholds and links from `cfg`."""
    # Long by nature: one declaration, the dashboard's panels in reading order.
    return make_dashboard(
        cfg,
        "health",
        "The exporter's own health: which sources collect, how long a cycle takes, what fails and why.",
        [
            stat("Sources up", [("sum(servescope_source_up)", "up")], "none", width=6),
            count_stat(
                "Sources down",
                "count(servescope_source_up == 0)",
                "down",
                width=6,
            ),
            count_stat(
                "Exporters scraped",
                'count(up{job=~".*servescope.*"} == 1)',
                "up",
                width=6,
                alarm=False,
            ),
            count_stat(
                "Simulated exporters",
                "sum(servescope_simulated)",
                "simulated",
                width=6,
                description="Exporters serving a simulated fleet (--simulate): never real data.",
                alarm=False,
            ),
            ts(
                "Source up, by source and endpoint",
                [("servescope_source_up", "{{instance}} {{source}} {{endpoint}}")],
                "none",
                width=24,
            ),
            ts(
                "Collection duration",
                [("servescope_source_collect_duration_seconds", "{{instance}} {{source}}")],
                "s",
                description="Wall time of each source's last cycle; compare with its interval.",
            ),
            ts(
                "Seconds since last success",
                [
                    (
                        "time() - servescope_source_last_success_timestamp_seconds",
                        "{{instance}} {{source}} {{endpoint}}",
                    )
                ],
                "s",
                description="Stale beyond 3 intervals: /readyz then reports the source as failing.",
            ),
            ts(
                "Errors by reason",
                [
                    (
                        "sum by (instance, source, reason) "
                        "(rate(servescope_source_errors_total[$__rate_interval]))",
                        "{{instance}} {{source}} {{reason}}",
                    )
                ],
                "ops",
            ),
            ts(
                "Exposition render time",
                [("servescope_exposition_render_duration_seconds", "{{instance}}")],
                "s",
                description="Time of the background re-render after a source cycle; a scrape never waits "
                "for it.",
            ),
            ts("Derived-signal history held", [("servescope_memory_history_bytes", "{{instance}}")], "bytes"),
            ts(
                "Exporter memory (RSS) and CPU",
                [('process_resident_memory_bytes{job=~".*servescope.*"}', "{{instance}} RSS")],
                "bytes",
            ),
            ts(
                "Exporter CPU",
                [
                    (
                        'rate(process_cpu_seconds_total{job=~".*servescope.*"}[$__rate_interval])',
                        "{{instance}} CPU",
                    )
                ],
                "percentunit",
            ),
        ],
        filters=[],
    )
