"""Node scenarios: NVML failing node-wide, a hung NVML source, NVLink links dying, an exporter rollout,
a PCIe link trained narrow."""

from __future__ import annotations

import math

from servescope_sim.fault_scenarios import GpuFault, Window

from .fault_rows import FaultRow
from .faults import PCIE_NARROW_WIDTH, NodeFaults
from .scenarios import Incident

# With every NVML series gone the node's exporter says why, and the fleet-wide absence alerts are right.
NVML_GONE_SYMPTOMS = ("ServescopeSourceDown", "ServescopeGpuMetricsAbsent", "ServescopeDerivedMetricsAbsent")
NVLINK_SYMPTOMS = ("ServescopeNvlinkReplayRecovery",)  # the simulator counts a replay per four CRC errors


def _burst_then_link_down(burst: Window) -> tuple[Incident, ...]:
    return (
        Incident(
            "NVLink CRC burst on GPU 1 (4 min)",
            burst,
            expect=("ServescopeNvlinkCrcErrors",),
            accept=NVLINK_SYMPTOMS,
            gpu=1,
        ),
        Incident(
            "NVLink 0 of GPU 1 died after its burst",
            Window(burst.end),
            expect=("ServescopeNvlinkLinkDown",),
            # The errors of the burst stay in the 10-minute increase after the link died.
            accept=("ServescopeNvlinkCrcErrors", *NVLINK_SYMPTOMS),
            gpu=1,
        ),
    )


NODE_ROWS = (
    FaultRow(
        "nvml-node-failure",
        35,
        10,
        math.inf,
        "the NVIDIA driver is gone (NVML: driver not loaded) for every GPU of the node",
        lambda window: NodeFaults(nvml_failure=window),
        lambda window: (
            Incident(
                "NVML fails node-wide", window, ("ServescopeGpuNodeNvmlLost",), accept=NVML_GONE_SYMPTOMS
            ),
        ),
    ),
    FaultRow(
        "nvml-hung",
        40,
        10,
        25,
        "an NVML call never returns: the source keeps its last values and source_up 1",
        lambda window: NodeFaults(nvml_hung=window),
        lambda window: (Incident("NVML source hung", window, ("ServescopeSourceStale",), grace_s=0.0),),
    ),
    FaultRow(
        "nvlink-link-down",
        45,
        15,
        math.inf,
        "NVLink 0 of GPU 1 goes down and stays down",
        lambda window: NodeFaults(link_down=GpuFault(1, window)),
        lambda window: (Incident("NVLink 0 of GPU 1 down", window, ("ServescopeNvlinkLinkDown",), gpu=1),),
    ),
    FaultRow(
        "crc-burst-link-dies",
        50,
        15,
        19,
        "NVLink 0 of GPU 1 counts 5 CRC flit errors/s, then the link goes down for good",
        lambda burst: NodeFaults(crc=GpuFault(1, burst), link_down=GpuFault(1, Window(burst.end))),
        _burst_then_link_down,
    ),
    FaultRow(
        "exporter-rollout",
        40,
        20,
        math.inf,
        "the exporter is rolled out: a new process in a new pod (its `instance`, the node, stays)",
        lambda window: NodeFaults(rollout_at=window.start),
    ),
    FaultRow(
        "pcie-link-narrow",
        35,
        10,
        math.inf,
        f"GPU 1's PCIe link retrains at x{PCIE_NARROW_WIDTH} of its x16 and stays there",
        lambda window: NodeFaults(pcie_narrow=GpuFault(1, window)),
        lambda window: (
            Incident(
                f"PCIe link of GPU 1 at x{PCIE_NARROW_WIDTH}", window, ("ServescopePcieLinkDegraded",), gpu=1
            ),
        ),
    ),
)
