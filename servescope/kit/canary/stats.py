"""The tests `canary analyze` judges with, on counts as Prometheus stores them (no per-request data).

- Mann-Whitney U on latencies known to their histogram bucket: each request's latency is known up to
  its bucket, so the requests of one bucket are ties, and U and its tie-corrected variance are computed
  from the bucket counts directly (no values are invented inside a bucket). The effect size is the
  probability that a canary request is slower than a stable one, ties counted half (0.5: alike).
- Fisher's exact test for two proportions (one-sided: the canary's share is larger), for the shares of
  requests over an SLO bound and of failed requests: exact at any count, where a z-test is not with a
  handful of bad requests.
- A conditional binomial test for two Poisson rates (preemptions per request): given all preemptions
  of both revisions, the canary's share of them against its share of requests.

One-sided p-values throughout: only a worse canary matters to a rollback.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Terms of a tail sum smaller than this share of the sum so far, past the mode, end it.
_TAIL_EPSILON = 1e-17


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


@dataclass(frozen=True, slots=True)
class RankTest:
    """Mann-Whitney U of the canary against the stable sample."""

    u: float  # pairs where the canary request is slower, ties counted half
    effect: float  # U / (n1 n2): the probability that a canary request is slower
    z: float
    p_value: float  # one-sided: the canary is slower


def mann_whitney(canary: Sequence[float], stable: Sequence[float], weight: float = 1.0) -> RankTest:
    """U from per-bucket counts (the same buckets, ascending), ties within a bucket.

    `weight` divides every count before the variance is taken: with counts of correlated observations
    (inter-token gaps, many per request), pass the observations per independent unit so the test counts
    requests, not tokens. The effect size does not depend on it.
    """
    if len(canary) != len(stable):
        raise ValueError("the two histograms must have the same buckets")
    a = [max(0.0, x) / weight for x in canary]
    b = [max(0.0, x) / weight for x in stable]
    n1, n2 = sum(a), sum(b)
    if n1 <= 0 or n2 <= 0:
        return RankTest(0.0, 0.5, 0.0, 1.0)
    u, below = 0.0, 0.0
    for count_a, count_b in zip(a, b, strict=True):
        u += count_a * (below + count_b / 2)
        below += count_b
    total = n1 + n2
    ties = sum((x + y) ** 3 - (x + y) for x, y in zip(a, b, strict=True))
    variance = n1 * n2 / 12 * ((total + 1) - ties / (total * (total - 1))) if total > 1 else 0.0
    effect = u / (n1 * n2)
    if variance <= 0:
        return RankTest(u * weight * weight, effect, 0.0, 1.0)
    z = (u - n1 * n2 / 2) / math.sqrt(variance)
    return RankTest(u * weight * weight, effect, z, normal_sf(z))


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _walk(start: int, stop: int, step: int, log_pmf: Callable[[int], float]) -> float:
    """The probabilities from `start` towards `stop` (inclusive), moving away from the mode: each term is
    smaller than the last, so the sum ends once they vanish."""
    total = 0.0
    for i in range(start, stop + step, step):
        term = math.exp(log_pmf(i))
        total += term
        if term <= total * _TAIL_EPSILON:
            break
    return total


def _upper_tail(x: int, low: int, high: int, mode: float, log_pmf: Callable[[int], float]) -> float:
    """P(X >= x) of a unimodal distribution on [low, high]: summed upward from x past the mode, or as one
    minus the lower tail summed downward from x - 1 below it; a few standard deviations of terms either
    way, whatever the counts."""
    if x <= low:
        return 1.0
    if x > high:
        return 0.0
    if x > mode:
        return min(1.0, _walk(x, high, 1, log_pmf))
    return max(0.0, 1.0 - _walk(x - 1, low, -1, log_pmf))


def fisher_greater(bad_canary: float, n_canary: float, bad_stable: float, n_stable: float) -> float:
    """One-sided p-value of Fisher's exact test: P(the canary has at least its bad requests | the bad
    requests of both, spread at random over all requests). Counts are rounded to whole requests."""
    x, n1 = round(bad_canary), round(n_canary)
    k, total = x + round(bad_stable), n1 + round(n_stable)
    if n1 <= 0 or total <= n1 or k <= 0:
        return 1.0
    log_all = _log_choose(total, n1)

    def log_pmf(i: int) -> float:
        return _log_choose(k, i) + _log_choose(total - k, n1 - i) - log_all

    low, high = max(0, n1 - (total - k)), min(k, n1)
    return _upper_tail(x, low, high, (n1 + 1) * (k + 1) / (total + 2), log_pmf)


def binomial_greater(successes: float, trials: float, p: float) -> float:
    """P(X >= successes) for X ~ Binomial(trials, p), counts rounded."""
    k, n = round(successes), round(trials)
    if p <= 0:
        return 1.0 if k <= 0 else 0.0
    if p >= 1:
        return 1.0 if k <= n else 0.0
    log_p, log_q = math.log(p), math.log1p(-p)

    def log_pmf(i: int) -> float:
        return _log_choose(n, i) + i * log_p + (n - i) * log_q

    return _upper_tail(k, 0, n, (n + 1) * p, log_pmf)
