"""Load test: what `servescope load` offers and achieves, its client latency, and the engine's view beside;
and the weekly capacity job's knee over the weeks.

The client series are `servescope load run --metrics-port`'s own (servescope_load_*), scraped like any
target. Client latency is measured from the scheduled send, so a client that falls behind shows as
schedule lag, not as a fast engine; the engine's own TTFT and queue come from the exporter's names. The
weekly job remote-writes one sample per run (catalog/capacity.py): each panel holds the latest for a
week and a day, a step a week.
"""

from __future__ import annotations

from typing import Any

import grafanalib.core as g

from servescope.bundle.dashboards.common import (
    ENGINE,
    RATE,
    Panel,
    m,
    make_dashboard,
    per_quantile,
    rate,
    stat,
    ts,
)
from servescope.core import catalog as c
from servescope.core.catalog import capacity as cap
from servescope.core.config import AlertsConfig

LOAD = "servescope_load_"
QUANTILES = (0.5, 0.99)


def client_quantile(q: float, histogram: str) -> str:
    return f"histogram_quantile({q:g}, sum by (le) (rate({LOAD}{histogram}_bucket{RATE})))"


def engine_quantile(q: float, histogram: str) -> str:
    return f"histogram_quantile({q:g}, sum by (le) ({rate(histogram + '_bucket')}))"


def client_latency_panel(title: str, histogram: str, **kwargs: Any) -> Panel:
    """The client's p50 and p99 of one of its latency histograms, in seconds."""
    return ts(title, per_quantile(lambda q: client_quantile(q, histogram), QUANTILES), "s", **kwargs)


def dashboard(cfg: AlertsConfig) -> g.Dashboard:
    """The dashboard, its thresholds and links from `cfg`."""
    # Long by nature: one declaration, the dashboard's panels in reading order.
    week = cfg.capacity_result_window
    return make_dashboard(
        cfg,
        "load",
        "A servescope load run as it happens: offered against achieved rate, validity, in-flight requests, "
        "client TTFT and e2e from the scheduled send, schedule lag, errors by reason, and the engine's own "
        "TTFT and queue beside the client's.",
        [
            ts(
                "Offered vs achieved rate",
                [
                    (f"max by (mode) ({LOAD}offered_rate)", "offered ({{mode}} loop)"),
                    (f"max by (mode) ({LOAD}achieved_rate)", "achieved, last step ({{mode}} loop)"),
                    (f"sum by (outcome) (rate({LOAD}requests_total{RATE}))", "finished {{outcome}}/s"),
                ],
                "reqps",
                width=16,
                description="Offered load of the running step (req/s open loop; clients when the mode says "
                "closed), the achieved rate of the last finished step, and requests finishing per second. "
                "Achieved below 98 % of offered makes a step invalid: the client, not the engine, set the "
                "rate.",
            ),
            stat(
                "Last step valid",
                [(f"min({LOAD}step_valid)", "valid")],
                "none",
                width=8,
                description="1 when the last finished step stands as a result; 0 when it was invalid "
                "(achieved "
                "rate under 98 % of offered, schedule lag p99 over its bound, a growing backlog, or above "
                "70 % "
                "of the client's own ceiling). The run's output names the reason.",
            ),
            client_latency_panel(
                "Client TTFT from the scheduled send",
                "ttft_seconds",
                thresholds=[cfg.p99_threshold_seconds],
                description="Time to first token as a user of an open-loop arrival sees it: from when the "
                f"request was due. Red line: the P99 target ({cfg.p99_threshold_seconds:g} s). A "
                f"closed-loop run hides queueing "
                "here.",
            ),
            ts(
                "Client TTFT vs the engine's TTFT (P99)",
                [
                    (client_quantile(0.99, "ttft_seconds"), "client p99"),
                    (engine_quantile(0.99, c.TTFT.name), "engine p99"),
                ],
                "s",
                thresholds=[cfg.p99_threshold_seconds],
                description="The client's P99 beside the engine histogram's P99 over the same interval. The "
                "engine counts from the request's arrival, the client from its schedule: a client line far "
                "above "
                "the engine's is client lag or the network path, not the engine.",
            ),
            client_latency_panel(
                "Client end-to-end latency",
                "e2e_seconds",
                description="Request latency from the scheduled send to the last token.",
            ),
            ts(
                "Schedule lag (p99)",
                [(client_quantile(0.99, "schedule_lag_seconds"), "p99")],
                "s",
                description="How late sends went out against the precomputed schedule. It grows when the "
                "in-flight cap is reached or the client runs out of CPU; past the bound (default 50 ms) the "
                "step is invalid.",
            ),
            ts(
                "In flight and engine queue",
                [
                    (f"sum({LOAD}in_flight)", "client in flight"),
                    (f"sum({m(c.RUNNING.name, ENGINE)})", "engine running"),
                    (f"sum({m(c.WAITING.name, ENGINE)})", "engine waiting"),
                ],
                "none",
                description="Requests the client has in flight beside the engine's running batch and queue. "
                "Waiting that grows through a step is a backlog: the offered rate is above capacity.",
            ),
            ts(
                "Weekly capacity knee",
                [
                    (f"max by (target) (last_over_time({cap.KNEE.name}[{week}]))", "knee {{target}}"),
                    (
                        f"max by (target) (last_over_time({cap.KNEE_LOWER.name}[{week}]))",
                        "interval low {{target}}",
                    ),
                    (
                        f"max by (target) (last_over_time({cap.KNEE_UPPER.name}[{week}]))",
                        "interval high {{target}}",
                    ),
                    (
                        f"max by (target) (last_over_time({cap.BASELINE_KNEE.name}[{week}]))",
                        "baseline {{target}}",
                    ),
                ],
                "reqps",
                width=16,
                description="The knee the weekly capacity job (CronJob servescope-capacity) measured against "
                "each staging target, its confidence interval and the baseline it was compared with, over "
                "the "
                "weeks. A step down is a change (image, flags, driver); a slow slide is drift. A week "
                "without a "
                "point measured no knee: the job's status says why.",
            ),
            stat(
                "Weekly capacity regression",
                [(f"max by (target) (last_over_time({cap.REGRESSION.name}[{week}]))", "{{target}}")],
                "none",
                width=8,
                thresholds=[1],
                description="1 when the last weekly run is a significant regression of its baseline: more "
                "than "
                f"{cfg.capacity_regression_drop:.0%} of capacity lost at comparable load, the definition "
                "ServescopeThroughputBelowBaseline shares (ServescopeCapacityRegression fires on it).",
            ),
            ts(
                "Errors by reason",
                [(f"sum by (reason) (rate({LOAD}errors_total{RATE}))", "{{reason}}")],
                "reqps",
                description="Failed requests per second by reason (timeout, connect, http_<status>, "
                "protocol, "
                "bad_response, no_content, not_sent). Errors are recorded, never dropped from the step.",
            ),
        ],
        filters=["model_name"],
    )
