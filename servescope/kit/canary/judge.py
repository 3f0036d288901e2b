"""One verdict per SLI, each from the test that fits it, and the rules that make it a verdict.

A verdict needs both revisions to have served `canary.min_requests` requests in the window: fewer is
`inconclusive` (not enough data), never a promotion or a rollback. A test says `rollback` only when it
is significant at the analysis' alpha divided among its tests (Bonferroni) and the difference is worth
acting on (the effect thresholds of the canary config); anything else with enough data is `promote`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from servescope.core.config import AlertsConfig
from servescope.kit.canary.histograms import Histogram, common
from servescope.kit.canary.stats import binomial_greater, fisher_greater, mann_whitney

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
class Sli:
    """What is judged, with which test, and why that test."""

    name: str
    title: str
    test: str
    why: str


@dataclass(frozen=True)
class Effect:
    """What a test found: its p-value and effect size, and the effect worth acting on."""

    name: str
    size: float
    p_value: float
    small: str = ""  # why the effect is too small to act on; empty: it is not


@dataclass(frozen=True)
class SliResult:
    """The verdict of one SLI, with the figures it rests on."""

    sli: Sli
    verdict: Verdict
    reason: str
    canary: dict[str, float] = field(default_factory=dict)
    stable: dict[str, float] = field(default_factory=dict)
    effect: Effect | None = None
    distribution: Distribution | None = None

    @property
    def name(self) -> str:
        return self.sli.name

    @property
    def title(self) -> str:
        return self.sli.title


@dataclass(frozen=True)
class Policy:
    """The thresholds of one analysis: alpha per test, the window, and the canary config's."""

    alpha_each: float
    window_s: float
    cfg: AlertsConfig

    def too_few(self, canary_n: float, stable_n: float) -> str:
        """Why the SLI cannot be judged for want of requests; empty when it can."""
        least = self.cfg.canary.min_requests
        sides = (("the canary", canary_n), ("stable", stable_n))
        short = [f"{who} served {n:.0f}" for who, n in sides if n < least]
        return (
            f"not enough data: {' and '.join(short)} requests in the window, fewer than {least}"
            if short
            else ""
        )

    def judged(self, base: SliResult, effect: Effect, worse: str) -> SliResult:
        """`rollback` when the effect is significant and not too small to act on, else `promote`."""
        verdict: Verdict
        if effect.p_value >= self.alpha_each:
            verdict, reason = "promote", f"not significantly worse (p = {effect.p_value:.3g})"
        elif effect.small:
            verdict, reason = "promote", f"significant but small: {effect.small}"
        else:
            verdict, reason = "rollback", f"{worse}, p = {effect.p_value:.3g}"
        return SliResult(base.sli, verdict, reason, base.canary, base.stable, effect, base.distribution)


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
        return SliResult(sli, "not judged", "neither revision exports this histogram")
    if canary is None or stable is None:
        return SliResult(sli, "inconclusive", "only one revision exports it")
    a, b = common(canary, stable)
    distribution = Distribution(a.bounds, tuple(a.counts()), tuple(b.counts()))
    lacking = policy.too_few(*requests)
    base = SliResult(
        sli, "inconclusive", lacking, _figures(a, requests[0]), _figures(b, requests[1]), None, distribution
    )
    if lacking:
        return base
    test = mann_whitney(a.counts(), b.counts(), max(1.0, per_request))
    least = policy.cfg.canary.min_effect
    small = f"P(canary slower) = {test.effect:.3f} < {least:g}" if test.effect < least else ""
    effect = Effect("P(canary slower)", test.effect, test.p_value, small)
    return policy.judged(base, effect, f"slower: P(canary slower) = {test.effect:.3f} >= {least:g}")


def _counted(
    sli: Sli, rate_name: str, counts: tuple[float, float, float, float], lacking: str
) -> tuple[SliResult, tuple[float, float]]:
    """The result so far of a count test on (canary events, canary requests, stable events, stable
    requests): both revisions' figures; and the two rates per request."""
    events_c, n_c, events_s, n_s = counts
    rates = (events_c / n_c if n_c else math.nan, events_s / n_s if n_s else math.nan)
    canary = {rate_name: rates[0], "events": events_c, "requests": n_c}
    stable = {rate_name: rates[1], "events": events_s, "requests": n_s}
    return SliResult(sli, "inconclusive", lacking, canary, stable), rates


def share(policy: Policy, sli: Sli, counts: tuple[float, ...] | None, least_increase: float) -> SliResult:
    """Fisher's exact test on (bad canary, canary requests, bad stable, stable requests)."""
    if counts is None:
        return SliResult(sli, "not judged", "no series to count it from")
    bad_c, n_c, bad_s, n_s = counts
    base, shares = _counted(sli, "share", (bad_c, n_c, bad_s, n_s), policy.too_few(n_c, n_s))
    if base.reason:
        return base
    increase = shares[0] - shares[1]
    small = f"+{increase:.2%} < +{least_increase:.2%}" if increase < least_increase else ""
    effect = Effect("share increase", increase, fisher_greater(bad_c, n_c, bad_s, n_s), small)
    return policy.judged(base, effect, f"larger by {increase:+.2%} (>= +{least_increase:.2%})")


def rates(
    policy: Policy, sli: Sli, events: tuple[float | None, float | None], requests: tuple[float, float]
) -> SliResult:
    """Preemptions per request of the canary against the stable's."""
    if events[0] is None and events[1] is None:
        return SliResult(sli, "not judged", "neither revision exports preemptions")
    k_c, k_s = events[0] or 0.0, events[1] or 0.0
    n_c, n_s = requests
    base, per_request = _counted(sli, "per_request", (k_c, n_c, k_s, n_s), policy.too_few(n_c, n_s))
    if base.reason:
        return base
    if k_c + k_s <= 0:
        return SliResult(sli, "promote", "no preemptions on either revision", base.canary, base.stable)
    ratio = per_request[0] / per_request[1] if per_request[1] > 0 else math.inf
    # What the canary would preempt per second with all the traffic: the preemption ticket's unit.
    projected = per_request[0] * (n_c + n_s) / policy.window_s
    floor, worse = policy.cfg.preemptions_per_second, policy.cfg.canary.latency_ratio
    small = ""
    if ratio < worse or projected < floor:
        small = f"{ratio:.2g}x, under {worse:g}x or {floor:g}/s at all the traffic ({projected:.2g}/s)"
    effect = Effect("rate ratio", ratio, binomial_greater(k_c, k_c + k_s, n_c / (n_c + n_s)), small)
    return policy.judged(base, effect, f"{ratio:.2g}x the stable's, {projected:.2g}/s at all the traffic")
