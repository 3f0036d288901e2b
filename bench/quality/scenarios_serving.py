"""Serving scenarios: data-parallel engines under unequal load, a TP=8 engine saturated, a scheduler
that hangs with requests running, a KV gauge stuck high on an idle engine, SGLang next to vLLM, and a
quiet night after a day of baseline."""

from __future__ import annotations

from servescope.alerts.config import AlertsConfig
from servescope.common.durations import parse_duration
from servescope.sim.fault_scenarios import EngineFault, Window

from .faults import EngineCurve, HungEngine, NodeFaults, StuckKv
from .scenarios import MINUTE, Busy, Curve, During, Incident, KvClients, Plan, flat

RAMP = Curve(((0.0, 0.3), (10 * MINUTE, 0.3), (20 * MINUTE, 0.97)))
TP8 = tuple(range(8))


def _saturated(cfg: AlertsConfig, gpu: int) -> Incident:
    return Incident(
        f"GPU {gpu} saturated",
        Busy(cfg.gpu_saturated_ratio, parse_duration(cfg.gpu_saturated_for), gpu),
        expect=("ServescopeGpuSaturated",),
        gpu=gpu,
    )


def _fleet_without_buffer(cfg: AlertsConfig) -> Incident:
    # Resolved against the mean over the node's GPUs: when it never crosses, the alert must stay silent.
    return Incident(
        "fleet without spare capacity",
        Busy(1 - cfg.capacity_buffer_ratio, parse_duration(cfg.capacity_for)),
        expect=("ServescopeFleetCapacityBufferLow",),
    )


def dp_unequal(cfg: AlertsConfig) -> Plan:
    scenario = NodeFaults(curve=flat(0.3), engine_curves=(EngineCurve(0, (0,), RAMP),))
    return Plan(
        "dp-unequal",
        "two data-parallel engines: engine 0 ramps 0.30 -> 0.97 (10-20 min) and holds, engine 1 stays 0.30",
        55 * MINUTE,
        scenario,
        (_saturated(cfg, 0), _saturated(cfg, 1), _fleet_without_buffer(cfg)),
    )


def tp8_saturated(cfg: AlertsConfig) -> Plan:
    return Plan(
        "tp8-saturated",
        "one TP=8 engine on 8 H100s ramps 0.30 -> 0.97 (10-20 min) and holds: every GPU saturated at once",
        50 * MINUTE,
        NodeFaults(curve=RAMP),
        (*(_saturated(cfg, gpu) for gpu in TP8), _fleet_without_buffer(cfg)),
        layout=(TP8,),
    )


def scheduler_hang(cfg: AlertsConfig) -> Plan:
    start = 15 * MINUTE
    return Plan(
        "scheduler-hang",
        "load 0.5; at 15 min engine 1's scheduler stops stepping with requests running (its server answers)",
        40 * MINUTE,
        NodeFaults(curve=flat(0.5), hung_engine=HungEngine(1, Window(start))),
        (
            Incident(
                "engine 1 scheduler hung",
                During(start),
                expect=("ServescopeSchedulerStuck",),
                engine=1,
            ),
        ),
    )


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


def serving_plans(cfg: AlertsConfig) -> list[Plan]:
    """The serving scenarios, in the order the benchmark lists them."""
    return [
        dp_unequal(cfg),
        tp8_saturated(cfg),
        scheduler_hang(cfg),
        kv_stuck_idle(cfg),
        sglang_next_to_vllm(cfg),
        quiet_night(cfg),
    ]
