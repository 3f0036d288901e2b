"""The SLOs' paging burn in the ground truth of a node run: latency from the engines' own histograms,
availability from the engines' states. The same pairs of windows and rates as the pages."""

from __future__ import annotations

from collections.abc import Callable
from itertools import accumulate

from servescope.bundle.alerts.rules_slo import PAGE
from servescope.core.config import AlertsConfig

from .node import Truth
from .scenarios import SloBurn

Interval = tuple[float, float]


def _seconds(window: str) -> float:
    return float(window[:-1]) * {"m": 60, "h": 3600, "d": 86400}[window[-1]]


def _trailing(values: list[float], steps: int) -> list[float]:
    prefix = [0.0, *accumulate(values)]
    return [prefix[i + 1] - prefix[max(0, i + 1 - steps)] for i in range(len(values))]


def page_flags(
    times: list[float], bad: list[float], total: list[float], budget: float, scale: float
) -> list[bool]:
    """Per step: whether either pair of windows burns over its rate (x `scale`)."""
    step = times[1] - times[0] if len(times) > 1 else 1.0

    def ratio(window: str) -> list[float | None]:
        n = max(1, round(_seconds(window) / step))
        return [b / a if a > 0 else None for b, a in zip(_trailing(bad, n), _trailing(total, n), strict=True)]

    flags = [False] * len(times)
    for factor, long, short in PAGE:
        bound = factor * budget * scale
        for i, (lw, sw) in enumerate(zip(ratio(long), ratio(short), strict=True)):
            flags[i] = flags[i] or (lw is not None and sw is not None and lw > bound and sw > bound)
    return flags


def burn_flags(
    truth: Truth,
    burn: SloBurn,
    deltas: Callable[[list[list[tuple[int, ...] | None]], int], tuple[list[int], list[int]]],
) -> list[bool]:
    """Per truth sample: whether the SLO named by `burn` burns at a paging rate."""
    cfg = AlertsConfig()
    if burn.sli == "availability":
        bad, total = _unavailable(truth, burn)
        return page_flags(truth.times, bad, total, 1 - cfg.availability_objective, burn.scale)
    bounds = truth.bounds.get(burn.sli)
    if not bounds:
        return [False] * len(truth.times)
    within = bounds.index(burn.bound) + 1
    totals, overs = deltas(truth.latency[burn.sli], within)
    return page_flags(
        truth.times, [float(o) for o in overs], [float(t) for t in totals], 1 - cfg.slo_objective, burn.scale
    )


def _unavailable(truth: Truth, burn: SloBurn) -> tuple[list[float], list[float]]:
    """Per sample: the share of engines that served and do not now (down, dead, hung), and 1 where any
    should serve (the averages are over the samples with engines, as the rule's record)."""
    served: set[int] = set()
    shares, counted = [], []
    for t, row in zip(truth.times, truth.engine_kv, strict=True):
        served |= {i for i, kv in enumerate(row) if kv is not None}
        hung = {i for i, window in burn.hung if window.active(t)}
        down = [i for i in served if row[i] is None or i in hung]
        shares.append(len(down) / len(served) if served else 0.0)
        counted.append(1.0 if served else 0.0)
    return shares, counted
