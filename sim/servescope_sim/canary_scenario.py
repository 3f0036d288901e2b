"""The `canary` scenario: a rollout whose new revision is slower to the first token.

Steady serving (load 0.6, 4 req/s per engine) from the pods of one Deployment, all of revision
6d4cf56db9 (cluster.py). At the pace's `canary_start_seconds` (4:00; SERVESCOPE_SIM_CANARY_AT seconds
when set, for end-to-end tests), the pod of engine 3 (the last engine, on nodes with fewer) is replaced by
one of revision 84b5c7f9d6, a build whose prefill is 4x slower: with a quarter of the model's requests
(4 engines), its P99 time to first token is about twice the stable revision's (1.9-2.0x through the
histogram's buckets over 2 minutes, simulated), its inter-token latency a third higher, nothing else
changes. The canary alert compares the two revisions on the exporter's `revision` label, which comes from
the pods' labels through the simulated API server, as on a real node.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from servescope_sim.cluster import CANARY_REVISION, DEPLOYMENT, STABLE_REVISION
from servescope_sim.scenarios import STEADY_ENGINE, EngineLoad, Pace, Steady

PREFILL_FACTOR = 4.0
CANARY_ENGINE = 3
CANARY_AT_ENV = "SERVESCOPE_SIM_CANARY_AT"


@dataclass(frozen=True)
class Canary(Steady):
    name: ClassVar[str] = "canary"
    description: ClassVar[str] = (
        "engine 3's pod becomes a new revision with 2x the TTFT (a canary to roll back)"
    )
    needs_cluster: ClassVar[bool] = True
    engine: int = CANARY_ENGINE
    gpus: tuple[int, ...] = ()
    start_seconds: float = 240.0

    def target(self, engines: int) -> int:
        """The canary's engine: engine 3, or the last one on a node with fewer engines."""
        return min(self.engine, engines - 1)

    def engine_loads(self, t: float, engines: int) -> list[EngineLoad]:
        loads = [STEADY_ENGINE] * engines
        if t >= self.start_seconds and engines > 1:
            canary = EngineLoad(arrival_rate=STEADY_ENGINE.arrival_rate, prefill_factor=PREFILL_FACTOR)
            loads[self.target(engines)] = canary
        return loads

    def revisions(self, t: float, engines: int) -> list[str]:
        found = [STABLE_REVISION] * engines
        if t >= self.start_seconds and engines > 1:
            found[self.target(engines)] = CANARY_REVISION
        return found

    def timeline(self) -> list[tuple[float, str]]:
        gpus = ",".join(str(g) for g in self.gpus) or "none"
        return [
            (0.0, f"every engine serves from a pod of {DEPLOYMENT}, revision {STABLE_REVISION}"),
            (
                self.start_seconds,
                f"engine {self.engine} (GPUs {gpus}) becomes revision {CANARY_REVISION}: a build whose "
                f"prefill is {PREFILL_FACTOR:g}x slower: about 2x the stable revision's P99 time to first "
                "token",
            ),
        ]


def canary(pace: Pace, layout: list[list[int]]) -> Canary:
    """Engine 3 (the last on smaller nodes) becomes the canary at the pace's time, or CANARY_AT_ENV's."""
    engine = min(CANARY_ENGINE, max(len(layout) - 1, 0))
    gpus = tuple(layout[engine]) if engine < len(layout) else ()
    return Canary(engine=engine, gpus=gpus, start_seconds=canary_start(pace))


def canary_start(pace: Pace) -> float:
    """When the canary starts: CANARY_AT_ENV (seconds) when set, else the pace's; ValueError naming it."""
    text = os.environ.get(CANARY_AT_ENV, "").strip()
    if not text:
        return pace.canary_start_seconds
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{CANARY_AT_ENV}={text!r}: not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise ValueError(f"{CANARY_AT_ENV}={text!r}: must be 0 or more seconds")
    return value
