"""One analysis: both revisions read over the window, each SLI judged, one overall verdict.

Overall: `rollback` when any SLI says so; else `inconclusive` when any judged SLI lacks data (or the
canary has nothing to be compared with); else `promote`. Exit codes 0 promote, 1 rollback, 2
inconclusive, as the command returns them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from servescope.core.config import AlertsConfig
from servescope.core.durations import parse_duration
from servescope.kit.canary import judge
from servescope.kit.canary.data import (
    BucketTraffic,
    RevisionData,
    Target,
    failed,
    revision_data,
    traffic,
    user_buckets,
)
from servescope.kit.canary.histograms import Histogram
from servescope.kit.canary.judge import Policy, SliResult, Verdict
from servescope.kit.canary.prometheus import Prometheus

EXIT_CODES: dict[str, int] = {"promote": 0, "rollback": 1, "inconclusive": 2}
# Tests an analysis may run (latency x3, shares over bounds x2, failed requests, preemptions): alpha is
# split among all of them, whether or not each has data, so a verdict never depends on what is missing.
TESTS = 7
WHY_LATENCY = (
    "Mann-Whitney U compares the whole distributions without assuming their shape, so a slower median "
    "and a heavier tail both count; each request's latency is known to its histogram bucket, so the "
    "requests of a bucket are ties, and U and its variance come from the bucket counts."
)
WHY_ITL = (
    f"{WHY_LATENCY} The gaps of one request are not independent: the variance counts each request's "
    "mean number of gaps as one observation."
)
WHY_SLO = (
    "The SLO promises a share of requests under its bound, and the bound is a bucket, so the counts over "
    "it are exact; Fisher's exact test stays right with a handful of slow requests, where a z-test does not."
)
WHY_ERRORS = (
    "Failed requests (abort, error) are a share of the finished ones: Fisher's exact test, as for the SLO."
)
WHY_RATES = (
    "Preemptions are counts: given both revisions' preemptions, the canary's share of them is binomial "
    "with its share of the requests when both preempt alike."
)


@dataclass(frozen=True)
class Analysis:
    model: str
    canary: str
    window: str
    at: float
    alpha: float
    alpha_each: float
    traffic: dict[str, float]
    buckets: tuple[BucketTraffic, ...]
    stable: str = ""
    verdict: Verdict = "inconclusive"
    reason: str = ""
    slis: tuple[SliResult, ...] = ()
    kv_usage: dict[str, float | None] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.verdict, 2)

    @property
    def canary_share(self) -> float:
        total = sum(self.traffic.values())
        return self.traffic.get(self.canary, 0.0) / total if total else 0.0


def _slo_counts(
    cfg: AlertsConfig, sli: str, canary: RevisionData, stable: RevisionData
) -> tuple[float, ...] | None:
    """(bad, requests) of both revisions for the SLI's bound; None without the histogram or the bucket."""
    bound = float(cfg.slo_bound(sli))
    found: list[float] = []
    for data in (canary, stable):
        histogram: Histogram | None = data.histograms.get(sli)
        if histogram is None or bound not in histogram.bounds:
            return None
        found += [histogram.count - histogram.at_or_below(bound), histogram.count]
    return tuple(found)


def overall(slis: tuple[SliResult, ...]) -> tuple[Verdict, str]:
    worse = [s.title for s in slis if s.verdict == "rollback"]
    if worse:
        return "rollback", f"worse on {', '.join(worse)}"
    lacking = [s.title for s in slis if s.verdict == "inconclusive"]
    if lacking:
        return "inconclusive", f"not enough data for {', '.join(lacking)}"
    if not any(s.verdict == "promote" for s in slis):
        return "inconclusive", "nothing could be judged"
    return "promote", "no SLI is worse"


TTFT = judge.Sli("ttft", "TTFT", judge.MANN_WHITNEY, WHY_LATENCY)
ITL = judge.Sli("itl", "inter-token latency", judge.MANN_WHITNEY, WHY_ITL)
E2E = judge.Sli("e2e", "end-to-end latency", judge.MANN_WHITNEY, WHY_LATENCY)
ERRORS = judge.Sli("errors", "failed requests", judge.FISHER, WHY_ERRORS)
PREEMPTIONS = judge.Sli("preemptions", "preemptions per request", judge.RATES, WHY_RATES)


def _slo(cfg: AlertsConfig, sli: str) -> judge.Sli:
    words = "TTFT" if sli == "ttft" else "end-to-end latency"
    return judge.Sli(f"{sli}_slo", f"{words} over {cfg.slo_bound(sli)} s", judge.FISHER, WHY_SLO)


def judge_all(policy: Policy, canary: RevisionData, stable: RevisionData) -> tuple[SliResult, ...]:
    """Every SLI of the two revisions, in the reports' order."""
    cfg = policy.cfg
    requests = (canary.requests, stable.requests)

    def hist(sli: str) -> tuple[Histogram | None, Histogram | None]:
        return canary.histograms.get(sli), stable.histograms.get(sli)

    def count(histogram: Histogram | None) -> float:
        return histogram.count if histogram is not None else 0.0

    itl, e2e = hist("itl"), hist("e2e")
    # Inter-token gaps per request: the design effect of counting tokens as observations.
    per_request = (count(itl[0]) + count(itl[1])) / sum(requests) if sum(requests) else 1.0
    finished = (sum(canary.finished.values()), sum(stable.finished.values()))
    errors = (failed(canary.finished), finished[0], failed(stable.finished), finished[1])
    slo = cfg.canary.slo_miss_increase
    return (
        judge.latency(policy, TTFT, hist("ttft"), requests),
        judge.latency(policy, ITL, itl, requests, per_request=per_request),
        judge.latency(policy, E2E, e2e, (count(e2e[0]), count(e2e[1]))),
        judge.share(policy, _slo(cfg, "ttft"), _slo_counts(cfg, "ttft", canary, stable), slo),
        judge.share(policy, _slo(cfg, "e2e"), _slo_counts(cfg, "e2e", canary, stable), slo),
        judge.share(policy, ERRORS, errors if any(finished) else None, cfg.canary.error_increase),
        judge.rates(policy, PREEMPTIONS, (canary.preemptions, stable.preemptions), requests),
    )


def analyze(
    prometheus: Prometheus, cfg: AlertsConfig, model: str, canary: str, *, stable: str | None, window: str
) -> Analysis:
    """Read both revisions at `prometheus.at` over `window` and judge them."""
    target = Target(prometheus, cfg, model, window)
    served = traffic(target)
    others = {revision: n for revision, n in served.items() if revision != canary}
    chosen = stable if stable is not None else (max(others, key=lambda r: others[r]) if others else "")
    policy = Policy(cfg.canary.alpha / TESTS, parse_duration(window), cfg)
    base = Analysis(
        model,
        canary,
        window,
        prometheus.at,
        cfg.canary.alpha,
        policy.alpha_each,
        served,
        tuple(user_buckets(target)),
    )
    if not chosen:
        reason = f"no other revision of {model} served requests in the last {window}: nothing to compare with"
        return replace(base, reason=reason)
    canary_data, stable_data = revision_data(target, canary), revision_data(target, chosen)
    slis = judge_all(policy, canary_data, stable_data)
    verdict, reason = overall(slis)
    usage = {canary: canary_data.kv_usage, chosen: stable_data.kv_usage}
    return replace(base, stable=chosen, verdict=verdict, reason=reason, slis=slis, kv_usage=usage)
