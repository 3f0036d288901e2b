"""Statistical studies on the virtual FIFO engine, whose knee the queue simulation gives: how often the
knee's interval holds it and how close the estimate lies (coverage), and how often `capacity compare`
flags identical configurations (false positives) and a slower one (power). Used by the slow tests and
by bench/capacity_truth.py, which records the figures the documents quote."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

from servescope.kit.capacity.compare import compare
from servescope.kit.capacity.result import CapacityRun, Provenance, build_run
from servescope.kit.capacity.search import SearchPlan, find_knee
from servescope.kit.capacity.steps import Slo
from tests.capacity.fifo_truth import FifoEngine, VirtualFifoRunner, true_knee

PROVENANCE = Provenance("virtual", "simulated", "fifo", "virtual-1", {"kind": "virtual FIFO engine"})


@dataclass
class Coverage:
    truth: float
    searches: int = 0
    covered: int = 0
    within_10: int = 0
    errors: list[float] = field(default_factory=list)
    widths: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # the engine's (virtual) seconds per search

    def line(self) -> str:
        return (
            f"truth {self.truth:.2f} req/s; {self.searches} searches: interval holds it {self.covered} "
            f"({self.covered / self.searches:.0%}), estimate within 10 % {self.within_10} "
            f"({self.within_10 / self.searches:.0%}), largest error {max(map(abs, self.errors)):.1%}, "
            f"median interval width {statistics.median(self.widths):.0%} of the knee, "
            f"{statistics.median(self.seconds):.0f} s of load per search (median)"
        )


def knee_coverage(engine: FifoEngine, plan: SearchPlan, searches: int, warmup_s: float = 5.0) -> Coverage:
    slo = plan.slos[0]
    found = Coverage(true_knee(engine, slo.limit_s, slo.quantile))
    runner = VirtualFifoRunner(engine, warmup_s)
    for seed in range(searches):
        knee = find_knee(runner, replace(plan, seed=seed * 101))
        estimate = knee.estimate or 0.0
        found.searches += 1
        found.covered += knee.lower <= found.truth <= knee.upper
        found.errors.append(estimate / found.truth - 1)
        found.within_10 += abs(found.errors[-1]) <= 0.1
        found.widths.append((knee.upper - knee.lower) / found.truth)
        found.seconds.append(sum(s.duration_s + warmup_s * s.parts for s in knee.steps))
    return found


def run(engine: FifoEngine, plan: SearchPlan, seed: int, label: str) -> CapacityRun:
    knee = find_knee(VirtualFifoRunner(engine), replace(plan, seed=seed))
    return build_run(label, replace(plan, seed=seed), knee, None, PROVENANCE)


@dataclass
class Gate:
    pairs: int = 0
    flagged: int = 0
    verdicts: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.flagged / self.pairs if self.pairs else 0.0


def compare_study(
    engine: FifoEngine, plan: SearchPlan, pairs: int, slowdown: float = 1.0, drop: float = 0.1
) -> Gate:
    """`pairs` baselines (probed at 1 - drop of their knee) each against a candidate with its own seeds
    on the engine slowed by `slowdown`, measured at the baseline's probe as the weekly job does."""
    gate = Gate()
    for pair in range(pairs):
        baseline = run(engine, replace(plan, probe_share=1 - drop), 1000 + 2 * pair, "baseline")
        if baseline.knee.status != "measured":
            continue
        probe = replace(plan, probe_qps=baseline.plan.probe_qps)
        candidate = run(engine.slower(slowdown), probe, 1001 + 2 * pair, "candidate")
        result = compare(baseline, candidate, drop=drop)
        gate.pairs += 1
        gate.flagged += result.regression
        gate.verdicts.append(result.verdict)
    return gate


P99_PLAN = SearchPlan((Slo("ttft", 0.5),), duration_s=30.0, start_qps=4.0, min_requests=1000)
P90_PLAN = SearchPlan(
    (Slo("ttft", 0.3, 0.9),), duration_s=15.0, start_qps=8.0, min_requests=0, resolution=0.1
)
