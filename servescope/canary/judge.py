"""One verdict per SLI, each from the test that fits it, and the rules that make it a verdict.

A verdict needs both revisions to have served `canary.min_requests` requests in the window: fewer is
`inconclusive` (not enough data), never a promotion or a rollback. A test says `rollback` only when it
is significant at the analysis' alpha divided among its tests (Bonferroni) and the difference is worth
acting on (the effect thresholds of the canary config); anything else with enough data is `promote`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

from servescope.alerts.config import AlertsConfig
from servescope.canary.histograms import Histogram, common
from servescope.canary.stats import binomial_greater, fisher_greater, mann_whitney

Verdict = Literal["promote", "rollback", "inconclusive", "not judged"]
MANN_WHITNEY = "Mann-Whitney U, buckets as ties (one-sided)"
FISHER = "two-proportion, Fisher's exact (one-sided)"
RATES = "two Poisson rates, conditional binomial (one-sided)"
QUANTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class Distribution:
    """Both revisions' histograms on their common bounds: what the reports draw."""

    bounds: tuple[float, ...]
    canary: tuple[float, ...]  # observations per bucket
    stable: tuple[float, ...]


@dataclass(frozen=True)
class SliResult:
    """The verdict of one SLI with the figures it rests on."""

    name: str
    title: str
    test: str
    why: str
    verdict: Verdict
    reason: str
    canary: dict[str, float] = field(default_factory=dict)
    stable: dict[str, float] = field(default_factory=dict)
    effect_name: str = ""
    effect: float | None = None
    p_value: float | None = None
    distribution: Distribution | None = None


@dataclass(frozen=True)
class Sli:
    """What is judged, how, and why that test."""

    name: str
    title: str
    test: str
    why: str

    def result(self, verdict: Verdict, reason: str, **figures: object) -> SliResult:
        return SliResult(self.name, self.title, self.test, self.why, verdict, reason, **figures)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Policy:
    """The thresholds of one analysis: the canary config's, and alpha per test."""

    cfg: AlertsConfig
    alpha_each: float
    window_s: float

    @property
    def min_requests(self) -> int:
        return self.cfg.canary.min_requests

    def too_few(self, canary_n: float, stable_n: float) -> str | None:
        """Why the SLI cannot be judged for want of requests, or None."""
        least = self.min_requests
        short = [
            f"{who} served {n:.0f}"
            for who, n in (("the canary", canary_n), ("stable", stable_n))
            if n < least
        ]
        if not short:
            return None
        return f"not enough data: {' and '.join(short)} requests in the window, fewer than {least}"

    def significant(self, p_value: float) -> bool:
        return p_value < self.alpha_each


def _figures(histogram: Histogram, requests: float) -> dict[str, float]:
    out = {f"p{q * 100:g}": histogram.quantile(q) for q in QUANTILES}
    return {**out, "requests": requests, "observations": histogram.count}


def latency(
    policy: Policy,
    sli: Sli,
    histograms: tuple[Histogram | None, Histogram | None],
    requests: tuple[float, float],
    *,
    per_request: float = 1.0,
) -> SliResult:
    """Mann-Whitney on the two latency histograms; `per_request` observations count as one (ITL)."""
    canary, stable = histograms
    if canary is None and stable is None:
        return sli.result("not judged", "neither revision exports this histogram")
    if canary is None or stable is None:
        return sli.result("inconclusive", "only one revision exports it")
    a, b = common(canary, stable)
    distribution = Distribution(a.bounds, tuple(a.counts()), tuple(b.counts()))
    base = sli.result("inconclusive", "", canary=_figures(a, requests[0]), stable=_figures(b, requests[1]))
    lacking = policy.too_few(*requests)
    if lacking:
        return _with(base, reason=lacking, distribution=distribution)
    test = mann_whitney(a.counts(), b.counts(), max(1.0, per_request))
    least = policy.cfg.canary.min_effect
    if not policy.significant(test.p_value):
        verdict, reason = "promote", f"not significantly slower (p = {test.p_value:.3g})"
    elif test.effect < least:
        verdict = "promote"
        reason = f"significant but small: P(canary slower) = {test.effect:.3f} < {least:g}"
    else:
        verdict = "rollback"
        reason = f"slower: P(canary slower) = {test.effect:.3f} >= {least:g}, p = {test.p_value:.3g}"
    return _with(
        base,
        verdict=verdict,
        reason=reason,
        effect_name="P(canary slower)",
        effect=test.effect,
        p_value=test.p_value,
        distribution=distribution,
    )


def share(policy: Policy, sli: Sli, counts: tuple[float, ...] | None, least_increase: float) -> SliResult:
    """Fisher's exact test on (bad canary, canary requests, bad stable, stable requests)."""
    if counts is None:
        return sli.result("not judged", "no series to count it from")
    bad_c, n_c, bad_s, n_s = counts
    shares = (bad_c / n_c if n_c else math.nan, bad_s / n_s if n_s else math.nan)
    base = sli.result(
        "inconclusive",
        "",
        canary={"share": shares[0], "bad": bad_c, "requests": n_c},
        stable={"share": shares[1], "bad": bad_s, "requests": n_s},
    )
    lacking = policy.too_few(n_c, n_s)
    if lacking:
        return _with(base, reason=lacking)
    p_value = fisher_greater(bad_c, n_c, bad_s, n_s)
    increase = shares[0] - shares[1]
    if not policy.significant(p_value):
        verdict, reason = "promote", f"not significantly larger (p = {p_value:.3g})"
    elif increase < least_increase:
        verdict, reason = "promote", f"significant but small: +{increase:.2%} < +{least_increase:.2%}"
    else:
        verdict, reason = (
            "rollback",
            f"larger by {increase:+.2%} (>= +{least_increase:.2%}), p = {p_value:.3g}",
        )
    return _with(
        base, verdict=verdict, reason=reason, effect_name="share increase", effect=increase, p_value=p_value
    )


def rates(
    policy: Policy, sli: Sli, events: tuple[float | None, float | None], requests: tuple[float, float]
) -> SliResult:
    """Preemptions per request of the canary against the stable's."""
    if events[0] is None and events[1] is None:
        return sli.result("not judged", "neither revision exports preemptions")
    k_c, k_s = events[0] or 0.0, events[1] or 0.0
    n_c, n_s = requests
    per_request = (k_c / n_c if n_c else math.nan, k_s / n_s if n_s else math.nan)
    base = sli.result(
        "inconclusive",
        "",
        canary={"per_request": per_request[0], "preemptions": k_c, "requests": n_c},
        stable={"per_request": per_request[1], "preemptions": k_s, "requests": n_s},
    )
    lacking = policy.too_few(n_c, n_s)
    if lacking:
        return _with(base, reason=lacking)
    if k_c + k_s <= 0:
        return _with(base, verdict="promote", reason="no preemptions on either revision")
    p_value = binomial_greater(k_c, k_c + k_s, n_c / (n_c + n_s))
    ratio = per_request[0] / per_request[1] if per_request[1] > 0 else math.inf
    # What the canary would preempt per second with all the traffic: the symptom bound's unit.
    projected = per_request[0] * (n_c + n_s) / policy.window_s
    floor, worse = policy.cfg.symptom_preemptions_per_second, policy.cfg.canary.latency_ratio
    if not policy.significant(p_value):
        verdict, reason = "promote", f"not significantly more (p = {p_value:.3g})"
    elif ratio < worse or projected < floor:
        verdict = "promote"
        reason = (
            f"more ({ratio:.2g}x) but under {worse:g}x or {floor:g}/s at all the traffic ({projected:.2g}/s)"
        )
    else:
        verdict = "rollback"
        reason = f"{ratio:.2g}x the stable's, {projected:.2g}/s at all the traffic, p = {p_value:.3g}"
    return _with(
        base, verdict=verdict, reason=reason, effect_name="rate ratio", effect=ratio, p_value=p_value
    )


def _with(result: SliResult, **changes: object) -> SliResult:
    return replace(result, **changes)  # type: ignore[arg-type]
