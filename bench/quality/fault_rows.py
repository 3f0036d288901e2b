"""Scenarios at the default load (0.5) whose faults and incidents hang on one window, stated as rows.

A row names only what differs between such scenarios: its window in minutes, what happens then, the
faults it sets on that window and the incidents that must be heard about them. The description starts
with the load and the window ("load 0.5; at 10 min ..." or "load 0.5; 10-25 min ...").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from servescope_sim.fault_scenarios import Window

from .scenarios import MINUTE, Incident, Plan, PlanScenario


def _nothing_heard(window: Window) -> tuple[Incident, ...]:
    return ()


@dataclass(frozen=True)
class FaultRow:
    """One scenario: `minutes` long, its faults on from `start` to `end` minutes (inf: for good)."""

    name: str
    minutes: float
    start: float
    end: float
    what: str
    faults: Callable[[Window], PlanScenario]
    incidents: Callable[[Window], tuple[Incident, ...]] = _nothing_heard
    exporter_unreachable: bool = False  # Prometheus cannot reach the exporter during the window

    def plan(self) -> Plan:
        window = Window(self.start * MINUTE, self.end * MINUTE)
        when = f"at {self.start:g} min" if math.isinf(self.end) else f"{self.start:g}-{self.end:g} min"
        return Plan(
            self.name,
            f"load 0.5; {when} {self.what}",
            self.minutes * MINUTE,
            self.faults(window),
            self.incidents(window),
            unreachable=window if self.exporter_unreachable else None,
        )
