"""What a fleet scenario is made of: the plan (a fleet and its incidents), the pages, the shorthands."""

from __future__ import annotations

from dataclasses import dataclass

from .fleet_model import Fleet, Node, Phase, Pod
from .fleet_truth import FleetIncident

MINUTE = 60.0
SERVING = (Phase(0.0, "serving"),)
# A KV-bound engine: its cache full, its GPU saturated, requests queue and wait for their first token.
KV_CAUSES = (
    "ServescopeGpuSaturatedKvPressure",
    "ServescopeKvCachePressure",
    "ServescopeGpuSaturated",
    "ServescopeFleetCapacityBufferLow",
    "ServescopeRequestQueueBuilding",
    "ServescopePreemptionsSustained",
    "ServescopeTtftSloBurnSlow",
    "ServescopeTtftP99High",
)
BLIND_PARTS = (
    "ServescopeExporterDown",
    "ServescopeGpuMetricsAbsent",
    "ServescopeDerivedMetricsAbsent",
    "ServescopeServingMetricsAbsent",
    "ServescopeGpuNodeWithoutExporter",
    "ServescopeMonitoringBlind",
)


@dataclass(frozen=True)
class FleetPlan:
    fleet: Fleet
    incidents: tuple[FleetIncident, ...] = ()

    @property
    def name(self) -> str:
        return self.fleet.name

    @property
    def description(self) -> str:
        return f"{self.fleet.description} (a fleet of {len(self.fleet.nodes)} nodes, both topologies)"

    @property
    def duration(self) -> float:
        return self.fleet.duration

    @property
    def gpu_model(self) -> str:
        return "H200"

    @property
    def layout(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(pod.gpus) for pod in self.fleet.pods)

    @property
    def pages(self) -> bool:
        """Whether an incident of the plan expects a page."""
        return any(a in PAGES for i in self.incidents for a in i.expect)


PAGES = (
    "ServescopeTtftSloBurnFast",
    "ServescopeE2eSloBurnFast",
    "ServescopeKvPressureHurtingRequests",
    "ServescopeAvailabilitySloBurnFast",
    "ServescopeMonitoringBlind",
    "ServescopeExporterTargetsAbsent",
)


def nodes(count: int, gpus: int = 2, **kwargs: object) -> tuple[Node, ...]:
    return tuple(Node(f"node-{i + 1}", gpus, **kwargs) for i in range(count))  # type: ignore[arg-type]


def pod(name: str, model: str, node: int, gpu: int, *phases: Phase, address: int = 10) -> Pod:
    """A pod of `model` on GPU `gpu` of node-`node`; its address is 10.<node>.<gpu>.<address>."""
    return Pod(name, model, f"node-{node}", (gpu,), f"10.{node}.{gpu}.{address}", phases or SERVING)


def replaced(start: float, loading: float = 4 * MINUTE) -> tuple[Phase, ...]:
    """An old pod deleted once its replacement served (`loading` after `start`; 0: a pod simply deleted
    at `start`): 1 min terminating, then gone."""
    return (
        Phase(0.0, "serving"),
        Phase(start + loading, "terminating"),
        Phase(start + loading + MINUTE, "gone"),
    )
