"""One run of the benchmark: a plan and a seed simulated, written, imported; then its alerts evaluated.

Every run lives in its own time slot of one TSDB: four days apart, so that no range in the rules (the
SLO's 3-day window is the longest) ever reaches another run's samples, and one Prometheus answers for
all of them. A run's `instance` label names its scenario and seed.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .evaluate import HEARTBEAT, Episode, firing_steps, group_episodes
from .node import Node, Timing
from .openmetrics import SeriesBuffer
from .prom import AlertRule, Prometheus, create_blocks
from .scenarios import ENGINE, Plan
from .truth import Recorded, TruthWindow, windows

BASE_WALL = 1_700_000_000.0  # 2023-11-14: any fixed instant keeps the files reproducible
SLOT_SECONDS = 4 * 86_400.0
TARGET_LABELS = ("__name__", "instance", "job")


@dataclass(frozen=True)
class RunSpec:
    plan: str
    seed: int
    slot: int

    @property
    def instance(self) -> str:
        return f"{self.plan}/seed{self.seed}"

    @property
    def wall_start(self) -> float:
        return BASE_WALL + self.slot * SLOT_SECONDS

    @property
    def file_stem(self) -> str:
        return f"{self.plan}-seed{self.seed}"


@dataclass(frozen=True)
class Generated:
    spec: RunSpec
    duration: float
    windows: tuple[TruthWindow, ...]
    samples: int
    simulate_s: float
    import_s: float
    oom_at: dict[int, float]


def _node(spec: RunSpec, plan: Plan, timing: Timing) -> Node:
    """The simulated node of one run: the plan's fleet, engines and scenario, the run's seed and clock."""
    return Node(
        plan.fresh_scenario(),
        plan.layout,
        gpus=plan.gpus,
        seed=spec.seed,
        gpu_model=plan.gpu_model,
        nvlinks=plan.nvlinks,
        wall_start=spec.wall_start,
        engine_config=ENGINE,
        xid_events=plan.xid_events,
        timing=timing,
    )


def generate(spec: RunSpec, plan: Plan, keep: frozenset[str], work: Path, timing: Timing) -> Generated:
    """Simulate the run, write its OpenMetrics file, import it into blocks under work/blocks/<run>."""
    started = time.perf_counter()
    node = _node(spec, plan, timing)
    buffer = SeriesBuffer(spec.instance, keep)
    rollout_at = getattr(plan.scenario, "rollout_at", None)

    def scraped(t: float, body: str) -> None:
        if rollout_at is not None and t >= rollout_at:
            buffer.retarget(f"{spec.instance}/pod2")  # the new pod's address: a new `instance`
        if plan.unreachable is not None and plan.unreachable.active(t):
            buffer.add_failed(spec.wall_start + t)
        else:
            buffer.add(body, spec.wall_start + t)

    try:
        node.run(plan.duration, scraped)
    finally:
        node.close()
    path = work / f"{spec.file_stem}.om"
    buffer.write(path)
    simulated = time.perf_counter()
    create_blocks(path, work / "blocks" / spec.file_stem)
    died = {e.index: e.died_at for e in node.engines if e.died_at is not None}
    recorded = Recorded(node.truth, died, plan.duration)
    return Generated(
        spec,
        plan.duration,
        tuple(windows(plan, recorded)),
        buffer.samples,
        simulated - started,
        time.perf_counter() - simulated,
        dict(node.truth.oom_at),
    )


def gather_blocks(work: Path) -> Path:
    """Move every run's blocks into one TSDB directory."""
    tsdb = work / "tsdb"
    tsdb.mkdir(exist_ok=True)
    for block in sorted((work / "blocks").glob("*/*")):
        if block.is_dir():
            shutil.move(str(block), tsdb / block.name)
    return tsdb


def evaluate_rule(
    prom: Prometheus, spec: RunSpec, duration: float, rule: AlertRule, step: float
) -> list[Episode]:
    """The firing episodes of one alert over one run, `for` applied at the evaluation step."""
    if rule.name == HEARTBEAT:
        return []
    start, end = spec.wall_start + step, spec.wall_start + duration
    episodes = []
    for series in prom.query_range(rule.expr, start, end, step):
        labels = tuple(sorted((k, v) for k, v in series["metric"].items() if k not in TARGET_LABELS))
        held = [round(float(t) - spec.wall_start, 3) for t, _ in series["values"]]
        fired = [t for t in firing_steps(held, rule.for_s, step, rule.keep_s) if t <= duration]
        for first, last in group_episodes(fired, step):
            episodes.append(Episode(rule.name, rule.severity, spec.plan, spec.seed, labels, first, last))
    return episodes
