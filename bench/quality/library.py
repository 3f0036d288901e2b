"""The scenario library: the plans the benchmark plays, each with the incidents it must be heard for.

Timelines start with at least 10 minutes of healthy serving, so that every detector has a baseline,
and end a few minutes after the last incident, so that alerts with a `for` have time to fire. Every
threshold and duration of a ground-truth condition comes from the alert configuration, i.e. from
the operators' definition of the incident (">85 % sustained" is the ratio and the `for`).
"""

from __future__ import annotations

import dataclasses

from servescope.core.config import AlertsConfig
from servescope.core.durations import parse_duration
from servescope_sim.fault_scenarios import EngineFault, GpuFault, Window
from servescope_sim.models import MIB

from .incidents import fleet_without_buffer, saturated
from .library_faults import FAULT_ROWS
from .scenarios import (
    GIB,
    MINUTE,
    AfterDeath,
    Both,
    Busy,
    Curve,
    Incident,
    KvAbove,
    KvClients,
    LeakToOom,
    Plan,
    PlanScenario,
    SloBreach,
    SloBurn,
    flat,
    steps,
)
from .scenarios_node import NODE_ROWS
from .scenarios_serving import serving_plans

# A KV cache under pressure queues and preempts requests: correct pages about the same incident.
KV_SYMPTOMS = ("ServescopeRequestQueueBuilding", "ServescopePreemptionsSustained")


def latency_truth(cfg: AlertsConfig) -> tuple[Incident, ...]:
    """Every scenario's latency incidents, from the engines' own histograms (ground truth).

    The SLO alerts are judged against what the requests really took, whatever the scenario: the SLO
    is breached while more than its error budget (1 %) of the model's requests in the last 30 minutes
    took longer than the bound, and P99 is over its threshold while more than 1 % did over 5 minutes.
    Burn-rate alerts read windows of up to days, so they may start up to an hour after the breach.
    """
    budget = 1 - cfg.slo_objective
    ttft, e2e = float(cfg.slo_latency_le), float(cfg.slo_e2e_latency_le)
    burn_grace = 60 * MINUTE
    breaches = (
        (
            f"TTFT over {ttft:g} s for more than {budget:.0%} of requests (30 min)",
            SloBreach("ttft", ttft, 30 * MINUTE, budget),
            ("ServescopeTtftSloBurnFast", "ServescopeTtftSloBurnSlow"),
            burn_grace,
        ),
        (
            f"P99 TTFT over {cfg.p99_threshold_seconds:g} s (5 min)",
            SloBreach("ttft", cfg.p99_threshold_seconds, 5 * MINUTE, 0.01),
            ("ServescopeTtftP99High",),
            Incident.grace_s,
        ),
        (
            f"e2e latency over {e2e:g} s for more than {budget:.0%} of requests (30 min)",
            SloBreach("e2e", e2e, 30 * MINUTE, budget),
            ("ServescopeE2eSloBurnFast", "ServescopeE2eSloBurnSlow"),
            burn_grace,
        ),
    )
    # Accepted, never expected: a scenario need not breach its SLO, and recall counts only the faults.
    accepted = tuple(
        Incident(name, when, expect=(), accept=accept, grace_s=grace)
        for name, when, accept, grace in breaches
    )
    return accepted + pages_truth(cfg)


def pages_truth(cfg: AlertsConfig) -> tuple[Incident, ...]:
    """The pages every scenario must send, from its truth: a latency SLO burning at a paging rate by the
    engines' own histograms, the model's availability by its engines' states. Where the truth burns at
    0.7 of the rate the page is correct, not required; its rates may lead the truth by 5 minutes."""
    ttft, e2e = float(cfg.slo_latency_le), float(cfg.slo_e2e_latency_le)
    pages = (
        ("TTFT budget burns at a paging rate", "ttft", ttft, ("ServescopeTtftSloBurnFast",), KV_PAGE),
        ("e2e budget burns at a paging rate", "e2e", e2e, ("ServescopeE2eSloBurnFast",), ()),
        (
            "availability budget burns at a paging rate",
            "availability",
            0.0,
            (AVAILABILITY,),
            AVAILABILITY_CAUSES,
        ),
    )
    found = []
    for name, sli, bound, expect, causes in pages:
        found.append(
            Incident(name, SloBurn(sli, bound), expect, causes, grace_s=20 * MINUTE, lead_s=5 * MINUTE)
        )
        relaxed = SloBurn(sli, bound, scale=0.7)
        found.append(
            Incident(
                f"{name} (relaxed)", relaxed, (), (*expect, *causes), grace_s=20 * MINUTE, lead_s=5 * MINUTE
            )
        )
    return tuple(found)


AVAILABILITY = "ServescopeAvailabilitySloBurnFast"
# The KV page is the TTFT page naming its engine: correct whenever the TTFT page is.
KV_PAGE = ("ServescopeKvPressureHurtingRequests",)
AVAILABILITY_CAUSES = ("ServescopeServingEndpointDown", "ServescopeSchedulerStuck")


def steady_diurnal(cfg: AlertsConfig) -> Plan:
    # A compressed day: quiet at 0.3, busy at 0.75, noise from the fleet, memory following the load.
    curve = Curve(((0.0, 0.525),), wave_amplitude=0.225, wave_period=120 * MINUTE)
    return Plan(
        "steady-diurnal",
        "a day's load compressed into 2 h (0.30 -> 0.75 -> 0.30) with noise; nothing is wrong",
        120 * MINUTE,
        PlanScenario(curve=curve),
    )


def traffic_ramp(cfg: AlertsConfig) -> Plan:
    curve = Curve(((0.0, 0.3), (10 * MINUTE, 0.3), (55 * MINUTE, 0.97)))
    return Plan(
        "traffic-ramp",
        "load 0.30 -> 0.97 over 45 min, then held: memory grows with traffic (no leak), the GPUs saturate",
        90 * MINUTE,
        PlanScenario(curve=curve),
        (saturated(cfg, 0), saturated(cfg, 1), fleet_without_buffer(cfg)),
    )


def bursts(cfg: AlertsConfig) -> Plan:
    # Bursts of 3, 6 and 9 minutes stay under the 10-minute `for`; the 20-minute one is an incident.
    shape = tuple(
        (start * MINUTE, minutes * MINUTE, 0.97) for start, minutes in ((10, 3), (25, 6), (42, 9), (62, 20))
    )
    return Plan(
        "bursts",
        "load 0.5 with bursts to 0.97 of 3, 6 and 9 min (no incident) and one of 20 min (saturation)",
        95 * MINUTE,
        PlanScenario(curve=steps(0.5, shape)),
        (saturated(cfg, 0), saturated(cfg, 1), fleet_without_buffer(cfg)),
    )


LEAK_START = 10 * MINUTE


def leak(cfg: AlertsConfig, mib_per_minute: float, duration: float, *, slow: bool = False) -> Plan:
    # An L40S with a small activation workspace leaves ~4.4 GiB of headroom under vLLM's 0.9 budget,
    # so a 40 MiB/min leak reaches OOM in about two hours (an H200 would take almost seven).
    scenario = PlanScenario(
        curve=flat(0.6),
        leak=GpuFault(0, Window(LEAK_START)),
        leak_bytes_per_second=mib_per_minute * MIB / 60,
        workspace_bytes=1 * GIB,
    )
    # The leak verdict judges the growth the load does not explain over both halves of an hour: a leak that
    # ends in an OOM within 45 minutes is the time-to-exhaustion alert's to catch, which reads 5 minutes.
    verdict = ("ServescopeGpuMemoryLeakSuspected",)
    in_time = mib_per_minute <= 40
    leak_incident = Incident(
        f"GPU 0 leaks {mib_per_minute:g} MiB/min until OOM",
        LeakToOom(0, LEAK_START),
        expect=(
            *(verdict if in_time else ()),
            "ServescopeGpuMemoryExhaustionSoon",
            "ServescopeEngineOverMemoryBudget",
        ),
        accept=("ServescopeGpuMemoryHeadroomLow", *(() if in_time else verdict)),
        gpu=0,
        grace_s=0.0,  # after the OOM the memory is gone: nothing can newly fire about the leak
    )
    # The run ends minutes after the OOM: the endpoint's ticket needs it down for most of 10 minutes.
    crash = Incident(
        "engine 0 died of OOM", AfterDeath(0), expect=(), accept=("ServescopeServingEndpointDown",), engine=0
    )
    return Plan(
        f"leak-{mib_per_minute:g}",
        f"load 0.6; from 10 min GPU 0 (L40S) leaks {mib_per_minute:g} MiB/min until its engine dies of OOM",
        duration,
        scenario,
        (leak_incident, crash),
        gpu_model="L40S",
        nvlinks=None,
        slow=slow,
    )


def kv_pressure(cfg: AlertsConfig, *, saturate: bool) -> Plan:
    window = Window(10 * MINUTE, 50 * MINUTE)
    scenario = PlanScenario(
        curve=flat(0.5),
        kv=EngineFault(0, (0,) if saturate else (), window),
        kv_clients=KvClients(4, 52, 20 * MINUTE),
    )
    kv_for = parse_duration(cfg.kv_pressure_for)
    pressure = KvAbove(0, cfg.kv_pressure_ratio, kv_for)
    incidents = [
        Incident(
            "engine 0 KV cache under pressure",
            pressure,
            expect=("ServescopeKvCachePressure",),
            accept=KV_SYMPTOMS,
            engine=0,
        )
    ]
    if saturate:
        busy = Busy(cfg.gpu_saturated_ratio, 0.0, 0)
        incidents += [
            Incident(
                "engine 0 KV pressure on a saturated GPU 0",
                Both(pressure, busy, parse_duration(cfg.combined_for)),
                expect=("ServescopeGpuSaturatedKvPressure",),
                engine=0,
                gpu=0,
            ),
            saturated(cfg, 0),
        ]
    what = "while its GPU 0 runs at 0.95" if saturate else "while its GPU stays at 0.5"
    return Plan(
        "kv-pressure-saturated" if saturate else "kv-pressure",
        f"load 0.5; 10-50 min: 4 -> 52 clients of 4096/1024-token requests fill engine 0's KV cache {what}",
        65 * MINUTE,
        scenario,
        tuple(incidents),
    )


def library(cfg: AlertsConfig | None = None) -> list[Plan]:
    """Every scenario of the benchmark, with its incidents built from the alert configuration."""
    cfg = cfg or AlertsConfig()
    plans = [
        steady_diurnal(cfg),
        traffic_ramp(cfg),
        bursts(cfg),
        leak(cfg, 20, 243 * MINUTE, slow=True),
        leak(cfg, 40, 135 * MINUTE),
        leak(cfg, 120, 60 * MINUTE),
        kv_pressure(cfg, saturate=True),
        kv_pressure(cfg, saturate=False),
        *(row.plan() for row in (*FAULT_ROWS, *NODE_ROWS)),
        *serving_plans(cfg),
    ]
    latency = latency_truth(cfg)
    return [dataclasses.replace(p, incidents=p.incidents + latency) for p in plans]
