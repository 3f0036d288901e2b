"""Node scenarios: NVML failing node-wide, a hung NVML source, NVLink links dying, an exporter rollout,
a PCIe link trained narrow."""

from __future__ import annotations

from servescope.alerts.config import AlertsConfig
from servescope.sim.fault_scenarios import GpuFault, Window

from .faults import PCIE_NARROW_WIDTH, NodeFaults
from .scenarios import MINUTE, During, Incident, Plan, flat

# With every NVML series gone the node's exporter says why, and the fleet-wide absence alerts are right.
NVML_GONE_SYMPTOMS = ("ServescopeSourceDown", "ServescopeGpuMetricsAbsent", "ServescopeDerivedMetricsAbsent")
NVLINK_SYMPTOMS = ("ServescopeNvlinkReplayRecovery",)  # the simulator counts a replay per four CRC errors


def nvml_node_failure(cfg: AlertsConfig) -> Plan:
    start = 10 * MINUTE
    return Plan(
        "nvml-node-failure",
        "load 0.5; at 10 min the NVIDIA driver is gone (NVML: driver not loaded) for every GPU of the node",
        35 * MINUTE,
        NodeFaults(curve=flat(0.5), nvml_failure=Window(start)),
        (
            Incident(
                "NVML fails node-wide",
                During(start),
                expect=("ServescopeGpuNodeNvmlLost",),
                accept=NVML_GONE_SYMPTOMS,
            ),
        ),
    )


def nvml_hung(cfg: AlertsConfig) -> Plan:
    window = Window(10 * MINUTE, 25 * MINUTE)
    return Plan(
        "nvml-hung",
        "load 0.5; 10-25 min an NVML call never returns: the source keeps its last values and source_up 1",
        40 * MINUTE,
        NodeFaults(curve=flat(0.5), nvml_hung=window),
        (
            Incident(
                "NVML source hung",
                During(window.start, window.end),
                expect=("ServescopeSourceStale",),
                grace_s=0.0,
            ),
        ),
    )


def nvlink_link_down(cfg: AlertsConfig) -> Plan:
    start = 15 * MINUTE
    return Plan(
        "nvlink-link-down",
        "load 0.5; at 15 min NVLink 0 of GPU 1 goes down and stays down",
        45 * MINUTE,
        NodeFaults(curve=flat(0.5), link_down=GpuFault(1, Window(start))),
        (Incident("NVLink 0 of GPU 1 down", During(start), expect=("ServescopeNvlinkLinkDown",), gpu=1),),
    )


def crc_burst_then_link_down(cfg: AlertsConfig) -> Plan:
    burst = Window(15 * MINUTE, 19 * MINUTE)
    return Plan(
        "crc-burst-link-dies",
        "load 0.5; 15-19 min NVLink 0 of GPU 1 counts 5 CRC flit errors/s, then the link goes down for good",
        50 * MINUTE,
        NodeFaults(curve=flat(0.5), crc=GpuFault(1, burst), link_down=GpuFault(1, Window(burst.end))),
        (
            Incident(
                "NVLink CRC burst on GPU 1 (4 min)",
                During(burst.start, burst.end),
                expect=("ServescopeNvlinkCrcErrors",),
                accept=NVLINK_SYMPTOMS,
                gpu=1,
            ),
            Incident(
                "NVLink 0 of GPU 1 died after its burst",
                During(burst.end),
                expect=("ServescopeNvlinkLinkDown",),
                # The errors of the burst stay in the 10-minute increase after the link died.
                accept=("ServescopeNvlinkCrcErrors", *NVLINK_SYMPTOMS),
                gpu=1,
            ),
        ),
    )


def exporter_rollout(cfg: AlertsConfig) -> Plan:
    return Plan(
        "exporter-rollout",
        "load 0.5; at 20 min the exporter is rolled out: a new process in a new pod (new `instance`)",
        40 * MINUTE,
        NodeFaults(curve=flat(0.5), rollout_at=20 * MINUTE),
    )


def pcie_link_narrow(cfg: AlertsConfig) -> Plan:
    start = 10 * MINUTE
    return Plan(
        "pcie-link-narrow",
        f"load 0.5; at 10 min GPU 1's PCIe link retrains at x{PCIE_NARROW_WIDTH} of its x16 and stays there",
        35 * MINUTE,
        NodeFaults(curve=flat(0.5), pcie_narrow=GpuFault(1, Window(start))),
        (
            Incident(
                f"PCIe link of GPU 1 at x{PCIE_NARROW_WIDTH}",
                During(start),
                expect=("ServescopePcieLinkDegraded",),
                gpu=1,
            ),
        ),
    )


def node_plans(cfg: AlertsConfig) -> list[Plan]:
    """The node scenarios, in the order the benchmark lists them."""
    return [
        nvml_node_failure(cfg),
        nvml_hung(cfg),
        nvlink_link_down(cfg),
        crc_burst_then_link_down(cfg),
        exporter_rollout(cfg),
        pcie_link_narrow(cfg),
    ]
