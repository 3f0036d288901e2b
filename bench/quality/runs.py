"""One run of the benchmark: a plan and a seed simulated on a node, its scrapes judged by promtool's rule
engine (the committed rules, exporter topology); its firing episodes paired with its truth.

The node's `instance` is what the exporter's ServiceMonitor makes it, the node's name (here the run's
name): it survives an exporter rollout, as on a cluster. kube-state-metrics lists the node as a GPU node.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .evaluate import Episode, RunOutcome
from .node import Node, Timing
from .openmetrics import StepBuffer
from .rule_engine import run as rule_engine
from .scenarios import ENGINE, Plan
from .truth import Recorded, windows

# promtool's clock starts at the Unix epoch: the node's wall clock does too, so that the timestamps the
# exporter exports (last success, an XID's last time) compare with the rules' time().
WALL_START = 0.0
# A fixed instant for series backfilled into a real Prometheus (tests/dashboards): reproducible files.
BASE_WALL = 1_700_000_000.0  # 2023-11-14


@dataclass(frozen=True)
class RunSpec:
    plan: str
    seed: int

    @property
    def instance(self) -> str:
        return f"{self.plan}/seed{self.seed}"

    @property
    def wall_start(self) -> float:
        return WALL_START

    @property
    def file_stem(self) -> str:
        return f"{self.plan}-seed{self.seed}"


@dataclass(frozen=True)
class Generated:
    outcome: RunOutcome
    duration: float
    samples: int
    simulate_s: float
    evaluate_s: float
    oom_at: dict[int, float]


def _node(spec: RunSpec, plan: Plan, timing: Timing) -> Node:
    """The simulated node of one run: the plan's fleet, engines and scenario, the run's seed and clock."""
    scenario = plan.fresh_scenario()
    return Node(
        scenario,
        plan.hardware,
        seed=spec.seed,
        wall_start=spec.wall_start,
        engine_config=ENGINE,
        timing=timing,
    )


def generate(spec: RunSpec, plan: Plan, rules: Path, work: Path, timing: Timing) -> Generated:
    """Simulate the run and evaluate the rules over its scrapes with promtool."""
    started = time.perf_counter()
    node = _node(spec, plan, timing)
    buffer = StepBuffer(spec.instance)

    def scraped(t: float, body: str) -> None:
        step = round(t / timing.scrape_interval)
        if plan.unreachable is not None and plan.unreachable.active(t):
            buffer.add_failed(step)
        else:
            buffer.add(body, step)

    try:
        node.run(plan.duration, scraped)
    finally:
        node.close()
    _kube_state_metrics(buffer, spec, plan)
    simulated = time.perf_counter()
    folder = work / spec.file_stem
    folder.mkdir(parents=True, exist_ok=True)
    fired = rule_engine(
        rules, buffer.input_series(), plan.duration, folder, interval=f"{timing.scrape_interval:g}s"
    )
    own = spec.plan, spec.seed
    episodes = tuple(
        Episode(f.alert, _severity(f.labels), *own, _own(f.labels), f.first, f.last) for f in fired
    )
    died = {e.index: e.died_at for e in node.engines if e.died_at is not None}
    recorded = Recorded(node.truth, died, plan.duration)
    outcome = RunOutcome(spec.plan, spec.seed, tuple(windows(plan, recorded)), episodes)
    return Generated(
        outcome,
        plan.duration,
        buffer.samples,
        simulated - started,
        time.perf_counter() - simulated,
        dict(node.truth.oom_at),
    )


def _kube_state_metrics(buffer: StepBuffer, spec: RunSpec, plan: Plan) -> None:
    """What kube-state-metrics says of the run's node: a GPU node (named as the run's instance, which
    the ServiceMonitor makes the node's name), there throughout."""
    ksm = 'job="kube-state-metrics",instance="kube-state-metrics:8080"'
    buffer.add_constant(f'kube_node_info{{{ksm},node="{spec.instance}"}}', 1.0, buffer.steps)
    capacity = f'kube_node_status_capacity{{{ksm},node="{spec.instance}",resource="nvidia_com_gpu"}}'
    buffer.add_constant(capacity, float(plan.gpus), buffer.steps)


def _severity(labels: tuple[tuple[str, str], ...]) -> str:
    return dict(labels).get("severity", "")


def _own(labels: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """An alert's labels without the target's `job` (the run's `instance` is kept: it names the node)."""
    return tuple((k, v) for k, v in labels if k != "job")
