"""`capacity compare A B`: does B serve A's load worse, beyond noise? The one definition of regression.

A regression is the baseline's load no longer served within the objective: capacity lost by more than
`regression_drop` (10 %) at comparable load. Daily, in production (ServescopeThroughputBelowBaseline):
tokens/s per GPU that far below a day and a week ago at the same running batch. Here, between two runs:
at the rate both measured (the baseline's probe, (1 - regression_drop) x its knee, when both have it;
else the highest common rate the baseline passed) B must miss the SLO (its quantile above the bound)
*and* be slower than A beyond noise: Welch's one-sided test on the logarithms of the quantiles of the
independent parts each run measured that step in (capacity/stats.py: requests within a part are
correlated, parts are not). Or B's knee interval lies wholly below A's, its knee more than
`regression_drop` lower.

Two runs compare only when they measured the same thing: the same SLOs, workload, runner, model and
engine version (the last only unless an upgrade is what is being tested). Otherwise `compare` refuses,
in one line naming the difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servescope.core.config import AlertsConfig
from servescope.core.errors import ServescopeError
from servescope.kit.capacity.quantiles import point
from servescope.kit.capacity.result import CapacityRun
from servescope.kit.capacity.stats import part_logs, welch_lower

# The shared definition (core/config_capacity.py, part of AlertsConfig): the daily
# ServescopeThroughputBelowBaseline reads the same.
DEFAULT_DROP: float = AlertsConfig.model_fields["capacity_regression_drop"].default


class IncompatibleRunsError(ServescopeError, ValueError):
    """The two runs did not measure the same thing; the message names the difference in one line."""

    reason = "incompatible_runs"


@dataclass(frozen=True, slots=True)
class Comparison:
    """The verdict and the figures behind it."""

    offered: float
    metric: str  # the first SLO's key, e.g. p99_ttft
    bound_s: float
    quantile_a: float
    quantile_b: float
    ratio: tuple[
        float, float
    ]  # B/A of the parts' quantiles (geometric means): one-sided lower bound, estimate
    parts: tuple[int, int]  # the independent parts of each run at the rate
    knee_a: tuple[float | None, float, float]  # estimate, lower, upper
    knee_b: tuple[float | None, float, float]
    latency_regression: bool
    knee_regression: bool
    verdict: str  # one line: why it is or is not a regression

    @property
    def regression(self) -> bool:
        return self.latency_regression or self.knee_regression


def incompatible(a: CapacityRun, b: CapacityRun, *, across_versions: bool = False) -> str | None:
    """Why the two runs cannot be compared, in one line; None when they can."""
    if a.plan.slos != b.plan.slos:
        return (
            f"the SLOs differ ({', '.join(s.label for s in a.plan.slos)} against "
            f"{', '.join(s.label for s in b.plan.slos)}): compare runs judged by the same objectives"
        )
    pa, pb = a.provenance, b.provenance
    if pa.workload != pb.workload:
        keys = sorted(k for k in {*pa.workload, *pb.workload} if pa.workload.get(k) != pb.workload.get(k))
        diff = ", ".join(f"{k} {pa.workload.get(k)!r} against {pb.workload.get(k)!r}" for k in keys)
        return f"the workloads differ ({diff}): a capacity holds for the requests it was measured with"
    if pa.runner != pb.runner:
        return f"the runners differ ({pa.runner} against {pb.runner}): each measures a different thing"
    if pa.model != pb.model:
        return f"the models differ ({pa.model!r} against {pb.model!r})"
    if pa.engine_version != pb.engine_version and not across_versions:
        return (
            f"the engine versions differ ({pa.engine_version} against {pb.engine_version}): pass "
            "--across-versions to test an upgrade"
        )
    return None


def common_rate(a: CapacityRun, b: CapacityRun) -> float:
    """The rate both runs measured that compare tests; raises ValueError when there is none."""
    shared = {rate for rate, _ in a.latencies} & {rate for rate, _ in b.latencies}
    if a.plan.probe_qps is not None:
        if a.plan.probe_qps in shared:
            return a.plan.probe_qps
        raise ValueError(
            f"the candidate did not measure the baseline's probe rate {a.plan.probe_qps:g} req/s: run it "
            "with --probe-qps from the baseline (the weekly job does)"
        )
    if not shared:
        raise ValueError("the two runs share no offered rate: start both at the same --start-qps")
    passed = {s.offered for s in a.knee.steps if s.verdict == "pass" or s.meets}
    below = [rate for rate in shared if rate in passed]
    return max(below) if below else min(shared)


def _comparable(a: CapacityRun, b: CapacityRun, across_versions: bool) -> None:
    """IncompatibleRunsError or ValueError naming why the two runs cannot be compared."""
    reason = incompatible(a, b, across_versions=across_versions)
    if reason is not None:
        raise IncompatibleRunsError(reason)
    if a.knee.status != "measured":
        raise ValueError(f"the baseline has no knee ({a.status_line}): it cannot be a baseline")
    if b.knee.status == "client_bound":
        raise ValueError(f"the candidate could not be measured ({b.status_line}): fix the client, run again")


def _parts(run: CapacityRun, rate: float) -> list[list[float]]:
    return [part for (r, _), parts in sorted(run.latencies.items()) if r == rate for part in parts]


def compare(
    a: CapacityRun,
    b: CapacityRun,
    *,
    alpha: float = 0.05,
    drop: float = DEFAULT_DROP,
    across_versions: bool = False,
) -> Comparison:
    """Compare run `b` against the baseline `a`; IncompatibleRunsError or ValueError when it cannot."""
    _comparable(a, b, across_versions)
    slo = a.plan.slos[0]
    knees = (a.knee.estimate, a.knee.lower, a.knee.upper), (b.knee.estimate, b.knee.lower, b.knee.upper)
    if b.knee.status == "engine_failed" or (b.knee.status == "not_reached" and not b.knee.reached_max):
        verdict = f"REGRESSION: the candidate serves no load within the SLO ({b.status_line})"
        nan = math.nan
        return Comparison(
            0.0, slo.key, slo.limit_s, nan, nan, (nan, nan), (0, 0), *knees, True, False, verdict
        )
    rate = common_rate(a, b)
    left, right = _parts(a, rate), _parts(b, rate)
    qa = point([v for part in left for v in part], slo.quantile)
    qb = point([v for part in right for v in part], slo.quantile)
    logs = part_logs(left, slo.quantile, slo.limit_s), part_logs(right, slo.quantile, slo.limit_s)
    low_log, log_ratio, _ = welch_lower(*logs, alpha)
    low = math.exp(low_log)
    latency = qb > slo.limit_s and low > 1
    estimate_b = b.knee.estimate if b.knee.estimate is not None else b.knee.upper
    knee = b.knee.upper < a.knee.lower and estimate_b < (1 - drop) * (a.knee.estimate or 0.0)
    verdict = _verdict(latency=latency, knee=knee, rate=rate, key=slo.key, bound=slo.limit_s, qb=qb, low=low)
    ratio = (low, math.exp(log_ratio))
    return Comparison(
        rate, slo.key, slo.limit_s, qa, qb, ratio, (len(left), len(right)), *knees, latency, knee, verdict
    )


def _verdict(*, latency: bool, knee: bool, rate: float, key: str, bound: float, qb: float, low: float) -> str:
    if latency:
        return (
            f"REGRESSION: at {rate:g} req/s the candidate's {key} ({qb:.3g} s) misses the {bound:g} s bound, "
            f"at least {low:.2f} times the baseline's (one-sided bound)"
        )
    if knee:
        return "REGRESSION: the candidate's knee interval lies wholly below the baseline's, and lower by more"
    why = "meets the bound" if qb <= bound else "is not significantly slower"
    return f"no regression: at {rate:g} req/s the candidate {why} ({key} {qb:.3g} s)"


def _interval(knee: tuple[float | None, float, float]) -> str:
    estimate, lower, upper = knee
    head = "-" if estimate is None else f"{estimate:.2f}"
    return f"{head} [{lower:.2f}, {'inf' if math.isinf(upper) else f'{upper:.2f}'}]"


def describe(result: Comparison) -> str:
    """A few lines a CI log shows; the verdict first."""
    ms = 1000
    low, ratio = result.ratio
    return "\n".join(
        [
            result.verdict,
            f"at {result.offered:g} req/s, {result.metric}: A {result.quantile_a * ms:.1f} ms, "
            f"B {result.quantile_b * ms:.1f} ms (bound {result.bound_s * ms:g} ms)",
            f"{result.metric} B / A: {ratio:.2f}, at least {low:.2f} (one-sided, Welch's test over "
            f"{result.parts[0]} and {result.parts[1]} independent parts)",
            f"knee: A {_interval(result.knee_a)} req/s, B {_interval(result.knee_b)} req/s",
        ]
    )
