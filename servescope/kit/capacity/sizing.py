"""Fleet sizing from a knee with a headroom buffer, and the client-versus-engine TTFT cross-check."""

from __future__ import annotations

import math
from dataclasses import dataclass

from servescope.kit.load.records import StepResult
from servescope.kit.load.summary import ttft_agreement


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


def cross_check(step: StepResult) -> CrossCheck | None:
    """The load runner's client-versus-engine TTFT agreement of a step, as the capacity report keeps it.

    None when the runner read no engine histogram. One definition for `servescope load` and capacity:
    the client's P99 from the send, never below the engine's P99 bucket, above it by no more than the
    measured path between them and the client's own lag.
    """
    agreement = ttft_agreement(step)
    if agreement is None:
        return None
    low, high = agreement.bucket
    return CrossCheck(step.offered, agreement.client_p99_s, low, high, agreement.agrees, agreement.path_s)
