"""One fleet run: a scenario, a topology and a seed; its series judged by promtool's rule engine with the
rules built for that topology; its firing episodes and its truth, ready to score."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from servescope.bundle.alerts.bundle import rule_file
from servescope.core.config import AlertsConfig

from .evaluate import Episode, RunOutcome
from .fleet_library import FleetPlan
from .fleet_series import FleetSeries
from .fleet_truth import windows
from .rule_engine import run as rule_engine

TOPOLOGIES = ("exporter", "podmonitor")


@dataclass(frozen=True)
class FleetSpec:
    plan: str
    topology: str
    seed: int

    @property
    def scenario(self) -> str:
        """The scenario's name in the scores: the plan and its topology."""
        return f"{self.plan} ({self.topology})"


def rules_for(topology: str, work: Path) -> Path:
    """The bundle's rule file for the topology, at the default config."""
    path = work / f"rules-{topology}.yaml"
    if not path.exists():
        cfg = AlertsConfig.model_validate({"engine_topology": topology})
        # Workers build it side by side: each writes its own file, then renames it (promtool never
        # reads half a file).
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(yaml.safe_dump(rule_file(cfg), sort_keys=False, width=200))
        tmp.replace(path)
    return path


def play(plan: FleetPlan, spec: FleetSpec, work: Path) -> RunOutcome:
    """Generate the run's series, evaluate every rule over them, and pair the episodes with the truth."""
    inputs, truth = FleetSeries(plan.fleet, spec.topology == "podmonitor", spec.seed).run()
    folder = work / f"{plan.name}-{spec.topology}-{spec.seed}"
    folder.mkdir(parents=True, exist_ok=True)
    fired = rule_engine(rules_for(spec.topology, work), inputs, plan.fleet.duration, folder)
    episodes = tuple(
        Episode(
            f.alert, dict(f.labels).get("severity", ""), spec.scenario, spec.seed, f.labels, f.first, f.last
        )
        for f in fired
    )
    return RunOutcome(spec.scenario, spec.seed, tuple(windows(plan.fleet, plan.incidents, truth)), episodes)
