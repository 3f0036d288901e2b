"""Confidence intervals of a latency quantile for correlated requests: order statistics and sections.

For n independent latencies, the number at or below the true q-quantile is Binomial(n, q), so a pair
of order statistics (X_(l), X_(u)) brackets it with a probability the binomial gives, whatever the
latency distribution. Requests of one load step are not independent: slow requests come in clusters (a
queue drains slowly), so a step holds less information than its count. Two corrections, the wider wins:

- the count becomes an effective one, n / tau, with tau the integrated autocorrelation time (Geyer's
  initial positive sequence) of a request exceeding the quantile's point estimate, or the bound;
- near capacity the clusters outlast any one part of a step (a 20 s window usually misses the rare long
  busy period that sets the long-run P99), which no estimate inside one part can see. A step measured
  in K independent parts (own seeds, own warm-ups) is also judged by sectioning: the pooled quantile,
  plus or minus Student's t(K - 1) times the spread of the parts' own quantiles over sqrt(K).

A step whose point estimate lies within a factor 2 of its bound is decided only once it has
MIN_PARTS_NEAR_BOUND parts, so that the spread between parts is seen before a verdict is believed.
"""

from __future__ import annotations

import math
import operator
import statistics
from collections.abc import Sequence

MAX_LAG = 256  # autocorrelation lags examined at most (the sums stop long before on real steps)
EXACT_VARIANCE = 30.0  # n q (1 - q) above which the binomial's normal approximation is used
NEAR_BOUND = 0.5  # a point estimate above this share of the bound is near it
MIN_PARTS_NEAR_BOUND = 3


def binomial_cdf(k: int, n: int, q: float) -> float:
    """P(Binomial(n, q) <= k)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if n * q * (1 - q) > EXACT_VARIANCE:
        z = (k + 0.5 - n * q) / math.sqrt(n * q * (1 - q))
        return 0.5 * math.erfc(-z / math.sqrt(2))
    log_q, log_p = math.log(q), math.log1p(-q)
    head = math.lgamma(n + 1)
    terms = (
        math.exp(head - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_q + (n - i) * log_p)
        for i in range(k + 1)
    )
    return min(1.0, sum(terms))


def order_indices(n: int, q: float, confidence: float) -> tuple[int, int]:
    """1-based ranks (l, u) with P(X_(l) <= quantile) >= 1 - a/2 and P(X_(u) >= quantile) >= 1 - a/2;
    l = 0 where no rank is low enough, u = n + 1 where none is high enough."""
    tail = (1 - confidence) / 2
    centre = int(n * q)
    low = 0  # P(X_(k) <= xi) = 1 - cdf(k - 1) falls as k grows
    for k in range(max(1, centre + 1), 0, -1):
        if 1 - binomial_cdf(k - 1, n, q) >= 1 - tail:
            low = k
            break
    high = n + 1  # P(X_(k) >= xi) = cdf(k - 1) rises with k
    for k in range(max(1, centre), n + 1):
        if binomial_cdf(k - 1, n, q) >= 1 - tail:
            high = k
            break
    return low, high


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (Lentz's method)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c if abs(1 + numerator / c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1) < 1e-12:
            break
    return result


def student_t_quantile(p: float, df: float) -> float:
    """The p-quantile (p > 0.5) of Student's t with `df` degrees of freedom, by bisection on its CDF."""

    def upper_tail(t: float) -> float:  # P(T > t) for t >= 0
        x = df / (df + t * t)
        a, b = df / 2, 0.5
        front = math.exp(
            math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
        )
        incomplete = (
            front * _beta_fraction(a, b, x) / a
            if x < (a + 1) / (a + b + 2)
            else 1 - front * _beta_fraction(b, a, 1 - x) / b
        )
        return incomplete / 2

    low, high = 0.0, 1e3
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if upper_tail(middle) > 1 - p else (low, middle)
    return (low + high) / 2


def _autocorrelation_time(series: Sequence[float]) -> float:
    """1 + 2 sum of autocorrelations, summed in pairs while the pairs stay positive (Geyer)."""
    n = len(series)
    if n < 8:
        return 1.0
    mean = sum(series) / n
    centred = [x - mean for x in series]
    variance = sum(x * x for x in centred) / n
    if variance <= 0:
        return 1.0

    def rho(lag: int) -> float:
        # Pairs (x[i], x[i + lag]) for i < n - lag, summed in that order: map stops at the shorter list.
        products: float = sum(map(operator.mul, centred, centred[lag:]))
        return products / (n * variance)

    tau, lag = 1.0, 1
    while lag + 1 < min(n // 2, MAX_LAG):
        pair = rho(lag) + rho(lag + 1)
        if pair <= 0:
            break
        tau += 2 * pair
        lag += 2
    return max(1.0, tau)


def point(values: Sequence[float], q: float) -> float:
    """Nearest-rank q-quantile; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def inflation(values: Sequence[float], q: float, bound: float | None = None) -> float:
    """How many requests carry one independent request's worth of information about the q-quantile: the
    autocorrelation time of exceeding its point estimate, and `bound` where some do (only the tail's
    clustering counts: the bulk of the distribution may drift without moving the tail)."""
    if len(values) < 8:
        return 1.0
    estimate = point(values, q)
    tau = _autocorrelation_time([1.0 if v > estimate else 0.0 for v in values])
    over = [1.0 if v > bound else 0.0 for v in values] if bound is not None else []
    if 0 < sum(over) < len(over):
        tau = max(tau, _autocorrelation_time(over))
    return tau


def _order_statistics(
    parts: Sequence[Sequence[float]], q: float, bound: float, confidence: float
) -> tuple[float, float, float]:
    pooled = sorted(v for part in parts for v in part)
    n = len(pooled)
    taus = [inflation(part, q, bound) for part in parts if part]
    effective = max(1.0, n / max(taus, default=1.0))
    n_eff = max(1, math.floor(effective))
    low, high = order_indices(n_eff, q, confidence)
    scale = n / n_eff
    lower = -math.inf if low < 1 else pooled[max(0, math.floor(low * scale) - 1)]
    upper = math.inf if high > n_eff else pooled[min(n - 1, math.ceil(high * scale) - 1)]
    return lower, upper, effective


def quantile_interval(
    parts: Sequence[Sequence[float]], q: float, bound: float, confidence: float = 0.95
) -> tuple[float, float, float]:
    """(lower, upper, effective count) of the q-quantile of a step measured in `parts` (each in the order
    its requests were sent). Infinite values (never answered) are allowed; an end no statistic can give
    is -inf or +inf (see the module docstring)."""
    parts = [part for part in parts if part]
    if not parts:
        return -math.inf, math.inf, 0.0
    lower, upper, effective = _order_statistics(parts, q, bound, confidence)
    pooled = point([v for part in parts for v in part], q)
    if len(parts) >= 2:
        sections = [point(part, q) for part in parts]
        if all(math.isfinite(s) for s in sections) and math.isfinite(pooled):
            spread = statistics.stdev(sections) / math.sqrt(len(parts))
            half = student_t_quantile((1 + confidence) / 2, len(parts) - 1) * spread
            lower, upper = min(lower, pooled - half), max(upper, pooled + half)
        else:
            upper = math.inf  # a part that never answered some request: its spread is unbounded
    if len(parts) < MIN_PARTS_NEAR_BOUND and NEAR_BOUND * bound < pooled < bound / NEAR_BOUND:
        return -math.inf, math.inf, effective  # this close to the bound, wait for the parts' spread
    if math.isfinite(lower) and lower < 0:
        lower = 0.0  # latencies are never negative: the sections' spread can reach below zero
    return lower, upper, effective
