"""What the weekly capacity job (`servescope capacity weekly`, the CronJob) writes to Prometheus.

Not the exporter's: the job remote-writes one sample of each after every run, stamped with the time
the run ended, so the knee over weeks is one point a week and the alert looks back for the latest.
Every series carries the staging `target` the job measured and the run's `label`.
"""

from __future__ import annotations

from servescope.core.catalog.spec import MetricSpec
from servescope.core.catalog.spec import gauge as _gauge

RUN = ("target", "label")
SOURCE = "capacity"

KNEE = _gauge(
    "servescope_capacity_knee_requests_per_second",
    "The knee the last weekly run measured: the highest rate whose SLO quantile met its bound (absent "
    "when the run measured none; see servescope_capacity_run_status).",
    RUN,
    SOURCE,
)
KNEE_LOWER = _gauge(
    "servescope_capacity_knee_lower_requests_per_second",
    "The lower end of the knee's confidence interval (the highest rate decided a pass).",
    RUN,
    SOURCE,
)
KNEE_UPPER = _gauge(
    "servescope_capacity_knee_upper_requests_per_second",
    "The upper end of the knee's confidence interval (the lowest rate decided a miss).",
    RUN,
    SOURCE,
)
BASELINE_KNEE = _gauge(
    "servescope_capacity_baseline_knee_requests_per_second",
    "The knee of the baseline the run was compared with.",
    RUN,
    SOURCE,
)
REGRESSION = _gauge(
    "servescope_capacity_regression",
    "1 when the run is a significant regression of the baseline (capacity compare), else 0; absent "
    "when no comparison was possible.",
    RUN,
    SOURCE,
)
PROBE_RATIO = _gauge(
    "servescope_capacity_probe_latency_ratio",
    "The run's SLO quantile at the baseline's probe rate divided by the baseline's (geometric mean of "
    "the parts).",
    RUN,
    SOURCE,
)
RUN_STATUS = _gauge(
    "servescope_capacity_run_status",
    "1 for the status of the last weekly run: measured, client_bound, not_reached or engine_failed.",
    (*RUN, "status"),
    SOURCE,
)
RUN_TIMESTAMP = _gauge(
    "servescope_capacity_run_timestamp_seconds", "When the last weekly run ended, Unix seconds.", RUN, SOURCE
)

CAPACITY: tuple[MetricSpec, ...] = (
    KNEE,
    KNEE_LOWER,
    KNEE_UPPER,
    BASELINE_KNEE,
    REGRESSION,
    PROBE_RATIO,
    RUN_STATUS,
    RUN_TIMESTAMP,
)
