"""The knee's estimate from a search's steps, and the steps as a latency curve."""

from __future__ import annotations

import math
from collections.abc import Sequence

from servescope.kit.capacity.steps import StepSummary


def crossing(steps: Sequence[StepSummary]) -> float | None:
    """Where the tail crosses the bound: the weighted least-squares line of log(quantile / bound) against
    the rate, over the steps near the bound (quantile within a factor 3 of it), each weighted by its
    requests, solved for zero. Near capacity one window's quantile scatters widely (a rare long busy
    period sets a long-run tail), so every step near the knee informs the estimate, not the two that
    happen to bracket it. None with fewer than two such rates or a line that does not rise."""
    near = [
        (s.offered, math.log(s.worst_ratio), s.requests)
        for s in steps
        if s.status == "valid" and math.isfinite(s.worst_ratio) and 1 / 3 < s.worst_ratio < 3
    ]
    if len({rate for rate, _, _ in near}) < 2:
        return None
    total = sum(w for _, _, w in near)
    mean_x = sum(x * w for x, _, w in near) / total
    mean_y = sum(y * w for _, y, w in near) / total
    spread = sum(w * (x - mean_x) ** 2 for x, _, w in near)
    slope = sum(w * (x - mean_x) * (y - mean_y) for x, y, w in near) / spread
    if slope <= 0:
        return None
    return mean_x - mean_y / slope


def curve(steps: Sequence[StepSummary]) -> list[StepSummary]:
    """The steps ordered by offered rate (then seed): the QPS-latency curve."""
    return sorted(steps, key=lambda s: (s.offered, s.seed))
