"""The fleet scenarios: the planned changes of a real fleet, engines that fail, blindness, diurnal days,
causes while the SLO holds, a histogram without the bound, two models per node, each with the incidents
an operator must hear about (the rest must stay quiet). Played in both topologies (fleet_runs.py).
"""

from __future__ import annotations

from .fleet_library_node import _day, daemonset_deleted, diurnal, fleet_blind, leak, node_without_exporter
from .fleet_library_serving import (
    crash_loop,
    e2e_burn,
    kv_burn,
    no_bound_bucket,
    quiet_causes,
    rolling_update,
    scale_down_and_move,
)
from .fleet_model import constant
from .fleet_plan import MINUTE, PAGES, FleetPlan

__all__ = ["PAGES", "FleetPlan", "library"]


def library() -> list[FleetPlan]:
    """Every fleet scenario, in the order the benchmark lists them."""
    return [
        rolling_update(),
        scale_down_and_move(),
        crash_loop(),
        kv_burn("kv-burn-through-a-scrape-gap", gap=True, two_models=False),
        kv_burn("two-models-per-node", gap=False, two_models=True),
        e2e_burn(),
        fleet_blind(),
        daemonset_deleted(),
        node_without_exporter(),
        quiet_causes("small-steady-queue"),
        quiet_causes("preemption-spike"),
        no_bound_bucket(),
        diurnal(),
        leak(
            "leak-40-flat",
            constant(0.5),
            300,
            60 * MINUTE,
            what="40 MiB/min from 1 h under a flat load",
            slow=False,
        ),
        leak(
            "leak-40-next-day-ramp",
            _day,
            36 * 60,
            (24 + 9) * 3600,
            what="a day of the daily cycle, then 40 MiB/min from the next morning's ramp",
            slow=True,
        ),
    ]
