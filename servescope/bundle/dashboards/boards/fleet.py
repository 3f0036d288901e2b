"""GPU fleet: what every GPU is, whether it answers, how busy, hot and power-bound it is, and its faults."""

from __future__ import annotations

import grafanalib.core as g

from servescope.bundle.dashboards.common import (
    GPU,
    ON_GPU,
    RATE,
    count_stat,
    gpu_rate,
    m,
    make_dashboard,
    per_gpu,
    stat,
    ts,
)
from servescope.core.config import AlertsConfig

ECC = "servescope_gpu_ecc_errors_total"
NOT_IDLE = 'reason!="gpu_idle"'  # an idle GPU's clocks are down, but it is not throttled

XID_EVENTS = f"sum by (hostname, gpu, xid) (increase({m('servescope_gpu_xid_errors_total', GPU)}{RATE}))"
XID_AGE = f"time() - {m('servescope_gpu_xid_last_seen_timestamp_seconds', GPU)}"

# Empty until a GPU reports an XID: the dashboard test checks these in the hardware-faults scenario.
FAULT_ONLY: list[str] = [XID_EVENTS, XID_AGE]


def dashboard(cfg: AlertsConfig) -> g.Dashboard:
    """The dashboard, its thresholds and links from `cfg`."""
    # Long by nature: one declaration, the dashboard's panels in reading order.
    return make_dashboard(
        cfg,
        "fleet",
        "Every GPU of the selected nodes: inventory and liveness, load against the saturation alert, memory, "
        "temperature, power and throttling, and hardware faults (XID, ECC, row remapping). NVLink and PCIe "
        "are on the Interconnect dashboard.",
        [
            stat(
                "GPUs per node",
                [(f"count by (hostname) ({m('servescope_gpu_info', GPU)})", "{{hostname}}")],
                "none",
                width=8,
                description="GPUs NVML enumerates on each node (servescope_gpu_info). A node with fewer GPUs "
                "than it has installed lost one from the bus.",
            ),
            stat(
                "GPUs up",
                [(f"sum({m('servescope_gpu_up', GPU)})", "up")],
                "none",
                width=8,
                description="GPUs whose every NVML lifecycle call succeeded in the last cycle.",
            ),
            count_stat(
                "GPUs down",
                f"count({m('servescope_gpu_up', GPU)} == 0)",
                "down",
                width=8,
                description="GPUs lost, needing a reset or gone from the bus (servescope_gpu_up == 0); "
                "ServescopeGpuLost fires on any. Their engines are down.",
            ),
            ts(
                "GPU up, per GPU",
                per_gpu("servescope_gpu_up"),
                "none",
                width=24,
                height=6,
                description="1 while the GPU answers NVML, 0 when it is lost. A step to 0 usually follows "
                "XID 79 "
                "(fallen off the bus).",
            ),
            ts(
                "Utilisation per GPU",
                per_gpu("servescope_gpu_utilization_ratio"),
                "percentunit",
                thresholds=[cfg.gpu_saturated_ratio],
                description="Share of time a kernel ran (NVML). Sustained above the red line "
                f"({cfg.gpu_saturated_ratio:.0%} for {cfg.gpu_saturated_for}) means compute-bound: lower "
                "the batch size or add workers. It says a kernel ran, not how many SMs worked: see SM "
                "active.",
            ),
            ts(
                "Memory used vs total, per GPU",
                per_gpu(
                    "servescope_gpu_memory_used_bytes",
                    "servescope_gpu_memory_total_bytes",
                    legends=("used", "total"),
                ),
                "bytes",
                description="Device memory in use against the memory installed. A serving GPU sits near "
                "vLLM's gpu_memory_utilization by design; slow growth on top of it is the leak signature "
                "(see the GPU memory dashboard).",
            ),
            ts(
                "Temperature per GPU",
                per_gpu("servescope_gpu_temperature_celsius"),
                "celsius",
                description="GPU core temperature. Read it with the throttling panel: heat matters when a "
                "thermal reason holds the clocks down.",
            ),
            ts(
                "Power vs power limit, per GPU",
                per_gpu(
                    "servescope_gpu_power_watts",
                    "servescope_gpu_power_limit_watts",
                    legends=("draw", "limit"),
                ),
                "watt",
                description="Board power draw against the enforced limit. Draw pinned at the limit with "
                "sw_power_cap active means throughput is bounded by power, not by batch size.",
            ),
            ts(
                "Throttling reasons active",
                [
                    (
                        f"max by (hostname, gpu, reason) "
                        f"({m('servescope_gpu_clock_event_reason_active', GPU, NOT_IDLE)})",
                        ON_GPU + " {{reason}}",
                    )
                ],
                "none",
                description="1 while a clock event reason holds the clocks down (gpu_idle left out: an "
                "idle GPU "
                "is not throttled). A thermal reason or hw_slowdown held for "
                f"{cfg.thermal_for} fires ServescopeGpuThermalThrottling, a power cap held for "
                f"{cfg.power_for} ServescopeGpuPowerThrottling.",
            ),
            ts(
                "Time throttled (DCGM)",
                [
                    (
                        gpu_rate("servescope_dcgm_power_violation_seconds_total"),
                        ON_GPU + " power",
                    ),
                    (
                        gpu_rate("servescope_dcgm_thermal_violation_seconds_total"),
                        ON_GPU + " thermal",
                    ),
                ],
                "percentunit",
                description="Share of time the clocks were held down by the power limit or by thermal limits "
                "(DCGM fields 240/241, seconds throttled per second).",
            ),
            ts(
                "SM clock per GPU",
                [(m("servescope_gpu_clock_hertz", GPU, 'clock="sm"'), ON_GPU)],
                "hertz",
                description="Current SM clock. Dips below the usual boost clock line up with the throttling "
                "reasons above.",
            ),
            ts(
                "Compute processes per GPU",
                per_gpu("servescope_gpu_compute_processes"),
                "none",
                description="Compute processes NVML sees on each GPU. A serving GPU normally runs one engine "
                "worker; 0 means the engine is gone, more than one means something shares the GPU.",
            ),
            ts(
                "SM active and tensor active (DCGM)",
                per_gpu(
                    "servescope_dcgm_sm_active_ratio",
                    "servescope_dcgm_tensor_active_ratio",
                    legends=("SM active", "tensor active"),
                ),
                "percentunit",
                width=24,
                description="DCGM profiling: share of cycles an SM had a warp assigned (1002) and the tensor "
                "pipes were busy (1004). High utilisation with low SM active means small kernels leave SMs "
                "idle; "
                "low tensor active on a transformer means it is not compute-bound.",
            ),
            ts(
                "XID events",
                [(XID_EVENTS, ON_GPU + " XID {{xid}}")],
                "none",
                description="Critical XID events per interval, by code (48 DBE, 63/64 row remap, 74 NVLink, "
                "79 fallen off the bus, 94/95 ECC...). A GPU's first event of a code creates the counter "
                "at 1, "
                "which increase() cannot see: the next panel shows it.",
            ),
            ts(
                "Time since last XID",
                [(XID_AGE, ON_GPU + " XID {{xid}}")],
                "s",
                description="Seconds since each GPU last reported each XID code (catches the first event). "
                "ServescopeGpuXidCritical fires while a critical code is younger than "
                f"{cfg.hardware_window}.",
            ),
            ts(
                "ECC errors",
                [
                    (
                        f"sum by (hostname, gpu, type, scope) ({gpu_rate(ECC)})",
                        ON_GPU + " {{type}} {{scope}}",
                    )
                ],
                "ops",
                description="ECC errors per second by type (corrected|uncorrected) and scope (volatile since "
                "driver load, aggregate over the GPU's life: the same errors counted twice, never add them). "
                "Any uncorrected volatile error fires ServescopeGpuEccUncorrectable.",
            ),
            ts(
                "Row remapping pending / failed",
                per_gpu(
                    "servescope_gpu_remapped_rows_pending",
                    "servescope_gpu_remapped_rows_failed",
                    legends=("pending", "failed"),
                ),
                "none",
                thresholds=[1],
                description="1 when a row remap waits for a GPU reset (drain and reset it when convenient) "
                "or "
                "failed (the GPU needs service). Pre-Ampere GPUs retire pages instead.",
            ),
        ],
        filters=["hostname", "gpu"],
    )
