"""Fleet scenarios about nodes: the fleet blind, the DaemonSet deleted, a GPU node without an exporter, a
diurnal ramp, and 40 MiB/min leaks under a flat load and under the next day's ramp."""

from __future__ import annotations

from .fleet_model import MIB, Fleet, Model, Node, constant, ramp
from .fleet_plan import BLIND_PARTS, MINUTE, FleetPlan, nodes, pod
from .fleet_truth import FleetIncident, during


def _serving_fleet(name: str, what: str, minutes: float, fleet_nodes: tuple[Node, ...]) -> Fleet:
    """A model with one replica on each node."""
    pods = tuple(pod(f"llama-{i}", "llama", i + 1, 0) for i in range(len(fleet_nodes)))
    return Fleet(name, what, minutes, fleet_nodes, (Model("llama", load=constant(4.0)),), pods)


def fleet_blind() -> FleetPlan:
    """Every exporter of 4 nodes stops answering from 15m to 35m (a NetworkPolicy, a broken image)."""
    down = lambda t: "down" if 15 * MINUTE <= t < 35 * MINUTE else "up"  # noqa: E731
    fleet = _serving_fleet(
        "fleet-blind", "every exporter of 4 nodes down 15-35m", 50, nodes(4, exporter=down)
    )
    blind = FleetIncident(
        "the fleet is blind", during(15, 35), ("ServescopeMonitoringBlind",), BLIND_PARTS, grace_s=10 * MINUTE
    )
    return FleetPlan(fleet, (blind,))


def daemonset_deleted() -> FleetPlan:
    """The exporter DaemonSet is deleted at 10m: its targets go."""
    gone = lambda t: "absent" if t >= 10 * MINUTE else "up"  # noqa: E731
    fleet = _serving_fleet(
        "daemonset-deleted", "the exporter DaemonSet deleted at 10m (3 nodes)", 40, nodes(3, exporter=gone)
    )
    absent = FleetIncident(
        "no exporter target at all",
        during(10),
        ("ServescopeExporterTargetsAbsent",),
        BLIND_PARTS,
        grace_s=10 * MINUTE,
    )
    return FleetPlan(fleet, (absent,))


def node_without_exporter() -> FleetPlan:
    """node-3 is a GPU node the DaemonSet does not reach (a taint): nothing of it is seen."""
    fleet_nodes = (*nodes(2), Node("node-3", 2, exporter=lambda t: "absent"))
    fleet = Fleet(
        "gpu-node-without-exporter",
        "node-3 has GPUs and no exporter",
        40,
        fleet_nodes,
        (Model("llama"),),
        (pod("llama-0", "llama", 1, 0), pod("llama-1", "llama", 2, 0)),
    )
    ticket = FleetIncident(
        "node-3 unseen", during(0), ("ServescopeGpuNodeWithoutExporter",), (), (("node", "node-3"),)
    )
    return FleetPlan(fleet, (ticket,))


def _diurnal(minute: float) -> float:
    """A day compressed to its ramp: 0.25 busy for an hour, up to 0.75 over 3 h, down over 3 h."""
    return (
        ramp(0.25, 0.75, 60 * MINUTE, 240 * MINUTE)(minute)
        if minute < 240 * MINUTE
        else ramp(0.75, 0.25, 240 * MINUTE, 420 * MINUTE)(minute)
    )


def diurnal() -> FleetPlan:
    """The load (and the memory that follows it) ramps 3x over 3 h and back: no leak, no alert."""
    model = Model("llama", load=lambda t: 8.0 * _diurnal(t), busy=_diurnal)
    fleet = Fleet(
        "diurnal-ramp",
        "a 3x ramp of the load over 3 h and back down; memory follows it",
        450,
        nodes(1),
        (model,),
        (pod("llama-0", "llama", 1, 0), pod("llama-1", "llama", 1, 1)),
        slow=True,
    )
    return FleetPlan(fleet)


def leak(name: str, busy: object, minutes: float, leak_from: float, *, what: str, slow: bool) -> FleetPlan:
    """GPU 0 of node-1 leaks 40 MiB/min from `leak_from` (seconds) under the given load."""
    rate = 40 * MIB / 60
    leaking = Node("node-1", 2, leak=lambda gpu, t: rate * max(0.0, t - leak_from) if gpu == 0 else 0.0)
    model = Model("llama", busy=busy)  # type: ignore[arg-type]
    fleet = Fleet(
        name,
        what,
        minutes,
        (leaking,),
        (model,),
        (pod("llama-0", "llama", 1, 0), pod("llama-1", "llama", 1, 1)),
        slow=slow,
    )
    incident = FleetIncident(
        "GPU 0 leaks 40 MiB/min",
        during(leak_from / MINUTE),
        ("ServescopeGpuMemoryLeakSuspected",),
        (),
        (("gpu", "0"),),
    )
    return FleetPlan(fleet, (incident,))


def _day(t: float) -> float:
    hour = (t % 86400) / 3600
    if hour < 9 or hour >= 18:
        return 0.25
    return 0.25 + 0.5 * (hour - 9) / 3 if hour < 12 else 0.75 if hour < 15 else 0.75 - 0.5 * (hour - 15) / 3
