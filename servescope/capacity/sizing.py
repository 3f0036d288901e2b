"""Fleet sizing from a knee with a headroom buffer, and the client-versus-engine TTFT cross-check."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from servescope.capacity.steps import quantile
from servescope.load.records import StepResult
from servescope.load.summary import path_seconds


@dataclass(frozen=True, slots=True)
class Provision:
    """Replicas (and GPUs) for a target peak, each loaded to (1 - buffer) of the knee's lower bound."""

    peak_qps: float
    per_replica_qps: float
    buffer: float
    replicas: int
    gpus: int


def provision(
    peak_qps: float, knee_lower: float, *, buffer: float = 0.2, gpus_per_replica: int = 1
) -> Provision:
    """Size for `peak_qps`; raises ValueError naming a bad input (no knee, a buffer outside [0, 1))."""
    if not 0 <= buffer < 1 or gpus_per_replica < 1 or peak_qps < 0:
        raise ValueError(
            f"buffer must be in [0, 1), gpus_per_replica >= 1 and peak_qps >= 0, "
            f"got {buffer}, {gpus_per_replica}, {peak_qps}"
        )
    if knee_lower <= 0:
        raise ValueError(f"the knee's lower bound must be > 0 to size a fleet, got {knee_lower}")
    usable = knee_lower * (1 - buffer)
    replicas = max(1, math.ceil(peak_qps / usable - 1e-9))
    return Provision(peak_qps, usable, buffer, replicas, replicas * gpus_per_replica)


@dataclass(frozen=True, slots=True)
class CrossCheck:
    """Client P99 TTFT against the engine histogram's bucket that holds its P99."""

    offered: float
    client_p99: float
    engine_low: float
    engine_high: float
    agrees: bool
    path_s: float = 0.0  # mean client TTFT minus the engine's mean (HTTP, API server), discounted


def cross_check(step: StepResult, q: float = 0.99) -> CrossCheck | None:
    """Compare client and engine TTFT at `q`; None when the runner read no engine histogram."""
    buckets = step.engine_ttft_buckets
    if not buckets or buckets[-1][1] <= 0:
        return None
    # The engine counts a request once its first token is out: the client's side counts the same ones.
    ttfts = [r.ttft_s for r in step.records if r.ttft_s is not None]
    client = quantile(ttfts, q)
    low, high = engine_quantile_bucket(buckets, q)
    # The histogram's bucket edges bound its quantile; the client's must fall in the same bucket, once
    # the path the engine's clock leaves out (measured as the difference of the means) is allowed for.
    path = path_seconds(ttfts, step.engine_ttft_mean_s)
    return CrossCheck(step.offered, client, low, high, low <= client <= high + path, path)


def engine_quantile_bucket(buckets: Sequence[tuple[float, float]], q: float) -> tuple[float, float]:
    """(lower, upper) edge of the cumulative bucket where the `q` quantile falls."""
    total = buckets[-1][1]
    target = q * total
    lower = 0.0
    for bound, cumulative in buckets:
        if cumulative >= target:
            return lower, bound
        lower = bound
    return lower, math.inf
