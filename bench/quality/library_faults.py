"""The library's fault plans: an NVLink CRC storm, a lost GPU, an engine down, an unreachable exporter."""

from __future__ import annotations

import math

from servescope_sim.fault_scenarios import EngineFault, GpuFault

from .fault_rows import FaultRow
from .scenarios import AfterDeath, Incident, PlanScenario

FAULT_ROWS = (
    FaultRow(
        "nvlink-crc",
        60,
        15,
        40,
        "NVLink 0 of GPU 1 counts 5 CRC flit errors/s",
        lambda window: PlanScenario(crc=GpuFault(1, window)),
        lambda window: (
            Incident(
                "NVLink CRC storm on GPU 1",
                window,
                expect=("ServescopeNvlinkCrcErrors",),
                # The simulator counts a replay for every fourth CRC error, as a link retrying bad flits does.
                accept=("ServescopeNvlinkReplayRecovery",),
                gpu=1,
            ),
        ),
    ),
    FaultRow(
        "gpu-lost",
        35,
        10,
        math.inf,
        "GPU 1 reports XID 79 and falls off the bus, killing engine 1",
        lambda window: PlanScenario(lost=GpuFault(1, window)),
        lambda window: (
            Incident("GPU 1 lost (XID 79)", window, ("ServescopeGpuLost", "ServescopeGpuXidCritical"), gpu=1),
            Incident(
                "engine 1 died with its GPU", AfterDeath(1), ("ServescopeServingEndpointDown",), engine=1
            ),
        ),
    ),
    FaultRow(
        "vllm-down",
        45,
        10,
        30,
        "engine 1 answers 503 (engine core dead), its GPU idle; then it restarts",
        lambda window: PlanScenario(down=EngineFault(1, (1,), window)),
        lambda window: (
            Incident("engine 1 down", window, ("ServescopeServingEndpointDown",), engine=1, grace_s=0.0),
        ),
    ),
    FaultRow(
        "exporter-unreachable",
        40,
        10,
        22,
        "Prometheus cannot reach the exporter (the node keeps serving)",
        lambda window: PlanScenario(),
        # The fleet is this one node: its exporter unreachable is the whole fleet blind, one page.
        lambda window: (
            Incident(
                "exporter unreachable",
                window,
                ("ServescopeExporterDown", "ServescopeMonitoringBlind"),
                accept=(
                    "ServescopeGpuMetricsAbsent",
                    "ServescopeServingMetricsAbsent",
                    "ServescopeDerivedMetricsAbsent",
                ),
                grace_s=0.0,
            ),
        ),
        exporter_unreachable=True,
    ),
)
