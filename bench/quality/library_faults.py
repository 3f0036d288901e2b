"""The library's fault plans: an NVLink CRC storm, a lost GPU, an engine down, an unreachable exporter."""

from __future__ import annotations

from servescope.alerts.config import AlertsConfig
from servescope.sim.fault_scenarios import EngineFault, GpuFault, Window

from .scenarios import (
    MINUTE,
    AfterDeath,
    During,
    Incident,
    Plan,
    PlanScenario,
    flat,
)


def nvlink_crc(cfg: AlertsConfig) -> Plan:
    window = Window(15 * MINUTE, 40 * MINUTE)
    return Plan(
        "nvlink-crc",
        "load 0.5; 15-40 min NVLink 0 of GPU 1 counts 5 CRC flit errors/s",
        60 * MINUTE,
        PlanScenario(curve=flat(0.5), crc=GpuFault(1, window)),
        (
            Incident(
                "NVLink CRC storm on GPU 1",
                During(window.start, window.end),
                expect=("ServescopeNvlinkCrcErrors",),
                # The simulator counts a replay for every fourth CRC error, as a link retrying bad flits does.
                accept=("ServescopeNvlinkReplayRecovery",),
                gpu=1,
            ),
        ),
    )


def gpu_lost(cfg: AlertsConfig) -> Plan:
    start = 10 * MINUTE
    return Plan(
        "gpu-lost",
        "load 0.5; at 10 min GPU 1 reports XID 79 and falls off the bus, killing engine 1",
        35 * MINUTE,
        PlanScenario(curve=flat(0.5), lost=GpuFault(1, Window(start))),
        (
            Incident(
                "GPU 1 lost (XID 79)",
                During(start),
                expect=("ServescopeGpuLost", "ServescopeGpuXidCritical"),
                gpu=1,
            ),
            Incident(
                "engine 1 died with its GPU",
                AfterDeath(1),
                expect=("ServescopeServingEndpointDown",),
                engine=1,
            ),
        ),
    )


def vllm_down(cfg: AlertsConfig) -> Plan:
    window = Window(10 * MINUTE, 30 * MINUTE)
    return Plan(
        "vllm-down",
        "load 0.5; 10-30 min engine 1 answers 503 (engine core dead), its GPU idle; then it restarts",
        45 * MINUTE,
        PlanScenario(curve=flat(0.5), down=EngineFault(1, (1,), window)),
        (
            Incident(
                "engine 1 down",
                During(window.start, window.end),
                expect=("ServescopeServingEndpointDown",),
                engine=1,
                grace_s=0.0,
            ),
        ),
    )


def exporter_unreachable(cfg: AlertsConfig) -> Plan:
    window = Window(10 * MINUTE, 22 * MINUTE)
    return Plan(
        "exporter-unreachable",
        "load 0.5; 10-22 min Prometheus cannot reach the exporter (the node keeps serving)",
        40 * MINUTE,
        PlanScenario(curve=flat(0.5)),
        (
            Incident(
                "exporter unreachable",
                During(window.start, window.end),
                expect=("ServescopeExporterDown",),
                grace_s=0.0,
            ),
        ),
        unreachable=window,
    )
