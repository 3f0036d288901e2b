"""The weekly capacity regression: the CronJob's `capacity weekly` result, remote-written to Prometheus.

Each weekly run writes `servescope_capacity_regression` once (1: a significant regression of its
baseline by `capacity compare`, the definition the daily ServescopeThroughputBelowBaseline shares:
`capacity_regression_drop` of capacity lost at comparable load). The alert reads the latest result
within `capacity_result_window` (a week and a day), so it fires once the run has written it and stays
until a later run says otherwise; a ticket, not a page: production's SLO alerts page if users suffer.
"""

from __future__ import annotations

from servescope.bundle.alerts.model import Alert, Group
from servescope.core.catalog import capacity as c
from servescope.core.config import AlertsConfig

KEYS = ("target", "label")


def capacity_regression(cfg: AlertsConfig) -> Group:
    latest = f"last_over_time({c.REGRESSION.name}[{cfg.capacity_result_window}])"
    return Group(
        "servescope-capacity-regression",
        (
            Alert(
                "ServescopeCapacityRegression",
                f"{latest} == 1",
                cfg.capacity_regression_for,
                "warning",
                "The weekly capacity run is a significant regression of its baseline.",
                "The weekly capacity run against {{ $labels.target }} ({{ $labels.label }}) no longer "
                f"serves its baseline's load within the SLO: more than {cfg.capacity_regression_drop:.0%} "
                "of capacity lost, beyond the noise of the measurement (capacity compare).",
                KEYS,
                "capacity",
            ),
        ),
    )
