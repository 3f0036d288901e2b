"""Serving scenarios: data-parallel engines under unequal load, a TP=8 engine saturated, a scheduler
that hangs with requests running, a KV gauge stuck high on an idle engine, SGLang next to vLLM, a
quiet night after a day of baseline, and a day of baseline before KV and endpoint trouble."""

from __future__ import annotations

import math

from servescope.core.config import AlertsConfig
from servescope.core.durations import parse_duration
from servescope_sim.fault_scenarios import EngineFault, Window

from .fault_rows import FaultRow
from .faults import EngineCurve, NodeFaults, StuckKv
from .incidents import fleet_without_buffer, saturated
from .scenarios import MINUTE, Curve, During, Incident, KvAbove, KvClients, Plan, SloBurn, flat

RAMP = Curve(((0.0, 0.3), (10 * MINUTE, 0.3), (20 * MINUTE, 0.97)))
TP8 = tuple(range(8))


def dp_unequal(cfg: AlertsConfig) -> Plan:
    scenario = NodeFaults(curve=flat(0.3), engine_curves=(EngineCurve(0, (0,), RAMP),))
    return Plan(
        "dp-unequal",
        "two data-parallel engines: engine 0 ramps 0.30 -> 0.97 (10-20 min) and holds, engine 1 stays 0.30",
        55 * MINUTE,
        scenario,
        (saturated(cfg, 0), saturated(cfg, 1), fleet_without_buffer(cfg)),
    )


def tp8saturated(cfg: AlertsConfig) -> Plan:
    return Plan(
        "tp8-saturated",
        "one TP=8 engine on 8 H100s ramps 0.30 -> 0.97 (10-20 min) and holds: every GPU saturated at once",
        50 * MINUTE,
        NodeFaults(curve=RAMP),
        (*(saturated(cfg, gpu) for gpu in TP8), fleet_without_buffer(cfg)),
        layout=(TP8,),
    )


SCHEDULER_HANG = FaultRow(
    "scheduler-hang",
    40,
    15,
    math.inf,
    "engine 1's scheduler stops stepping with requests running (its server answers)",
    lambda window: NodeFaults(hung_engine=EngineFault(1, (), window)),
    # One engine of two hung: half the model's endpoints make no progress, the model's availability burns.
    lambda window: (
        Incident("engine 1 scheduler hung", window, ("ServescopeSchedulerStuck",), engine=1),
        Incident(
            "availability budget burns (engine 1 hung)",
            SloBurn("availability", hung=((1, window),)),
            ("ServescopeAvailabilitySloBurnFast",),
            ("ServescopeSchedulerStuck",),
            grace_s=20 * MINUTE,
            lead_s=5 * MINUTE,
        ),
    ),
)


def scheduler_hang(cfg: AlertsConfig) -> Plan:
    return SCHEDULER_HANG.plan()


def kv_stuck_idle(cfg: AlertsConfig) -> Plan:
    idle = Curve(((0.0, 0.5), (10 * MINUTE, 0.5), (10 * MINUTE, 0.0)))
    scenario = NodeFaults(
        curve=flat(0.5),
        engine_curves=(EngineCurve(1, (1,), idle),),
        stuck_kv=StuckKv(1, 0.95, Window(12 * MINUTE)),
    )
    return Plan(
        "kv-stuck-idle",
        "load 0.5; from 10 min engine 1 gets no requests; from 12 min its KV gauge reads 0.95 (vLLM #22545)",
        45 * MINUTE,
        scenario,
    )


def sglang_next_to_vllm(cfg: AlertsConfig) -> Plan:
    # One model, two endpoints, every request fast: the SLO must read no miss from the SGLang endpoint
    # whose TTFT buckets skip the objective's bound, and a warning must name that endpoint.
    return Plan(
        "sglang-next-to-vllm",
        "load 0.5; one model served by a vLLM engine and an SGLang one, whose TTFT buckets jump 0.4 -> 0.6",
        45 * MINUTE,
        NodeFaults(curve=flat(0.5), sglang_engines=(1,)),
        (
            Incident(
                "SGLang endpoint without the TTFT objective's bucket",
                During(0.0),
                expect=("ServescopeSloBucketMissing",),
                engine=1,
            ),
        ),
    )


DAY = 23.5 * 60 * MINUTE  # the baselines read a day back, the KV anomaly 23 h: the night must come after


def quiet_night(cfg: AlertsConfig) -> Plan:
    # A day at 0.6 with engine 0 holding a steady share of its KV cache (12 long requests), then a
    # night at 0.1: KV and healthy endpoints drop below their daily baselines, which is no incident.
    return Plan(
        "quiet-night",
        "a day (23.5 h) at 0.6, engine 0 holding 12 long requests' KV, then a quiet night at 0.1 for 1.5 h",
        DAY + 90 * MINUTE,
        NodeFaults(
            curve=Curve(((0.0, 0.6), (DAY, 0.6), (DAY + 10 * MINUTE, 0.1))),
            kv=EngineFault(0, (), Window(0.0, DAY)),
            kv_clients=KvClients(12, 12, MINUTE),
        ),
        slow=True,
    )


# KV filling with long requests queues and preempts them; a page once requests suffer is right too.
KV_HURTS = (
    "ServescopeRequestQueueBuilding",
    "ServescopePreemptionsSustained",
    "ServescopeKvPressureHurtingRequests",
)


def day_then_kv_and_endpoint(cfg: AlertsConfig) -> Plan:
    # A day of chat at 0.3 builds the daily baselines (KV usage per engine, healthy endpoints per model);
    # then long requests fill engine 0's KV cache far above its day, and engine 1 goes down for good.
    kv = Window(DAY)
    down = EngineFault(1, (1,), Window(DAY + 40 * MINUTE))
    return Plan(
        "day-then-kv-and-endpoint",
        "a day (23.5 h) of chat at 0.3; then 4 -> 52 clients of long requests fill engine 0's KV cache, "
        "and at +40 min engine 1 goes down for good: one of the model's two endpoints left",
        DAY + 90 * MINUTE,
        NodeFaults(
            curve=flat(0.3), kv=EngineFault(0, (), kv), kv_clients=KvClients(4, 52, 20 * MINUTE), down=down
        ),
        _kv_and_endpoint_incidents(cfg, kv, down.window),
        slow=True,
    )


def _kv_and_endpoint_incidents(cfg: AlertsConfig, kv: Window, down: Window) -> tuple[Incident, ...]:
    # Each of the two KV alerts is a correct page about the other's incident.
    anomaly, pressure = "ServescopeKvCacheAnomaly", "ServescopeKvCachePressure"
    above = KvAbove(0, cfg.kv_pressure_ratio, parse_duration(cfg.kv_pressure_for))
    return (
        Incident(
            "engine 0 KV usage far above its daily baseline", kv, (anomaly,), (pressure, *KV_HURTS), engine=0
        ),
        Incident("engine 0 KV cache under pressure", above, (pressure,), (anomaly, *KV_HURTS), engine=0),
        Incident(
            "engine 1 down",
            down,
            ("ServescopeServingEndpointDown",),
            engine=1,
        ),
        Incident("the model down to one of its two endpoints", down, ("ServescopeHealthyEndpointsLow",)),
    )


def serving_plans(cfg: AlertsConfig) -> list[Plan]:
    """The serving scenarios, in the order the benchmark lists them."""
    builders = (
        dp_unequal,
        tp8saturated,
        scheduler_hang,
        kv_stuck_idle,
        sglang_next_to_vllm,
        quiet_night,
        day_then_kv_and_endpoint,
    )
    return [build(cfg) for build in builders]
