"""GPU health and GPU memory alerts."""

from __future__ import annotations

from servescope import catalog as c
from servescope.alerts.config import AlertsConfig
from servescope.alerts.model import GPU_KEYS, Alert, Group, sel
from servescope.catalog import derived as dm
from servescope.common.durations import parse_duration

GPU_BY = "instance, hostname, gpu, uuid"
ON_GPU = "{{ $labels.hostname }} GPU {{ $labels.gpu }} ({{ $labels.uuid }})"


def health(cfg: AlertsConfig) -> Group:
    # One declarative list of the group's alerts, read top to bottom as the bundle's reference: longer than
    # 40 lines on purpose.
    w = cfg.hardware_window
    xids = "|".join(str(x) for x in cfg.critical_xids)
    nvlink = sel(cfg, c.NVLINK_ERRORS.name, 'type=~"crc_flit|crc_data"')
    # DCGM fields 409 (flit) and 419 (data), summed over links; labelled apart so `or` keeps both.
    dcgm_crc = " or ".join(
        f'label_replace(increase({sel(cfg, name)}[{w}]), "field_id", "{field}", "", "")'
        for name, field in (
            ("servescope_dcgm_nvlink_crc_flit_errors_total", "409"),
            ("servescope_dcgm_nvlink_crc_data_errors_total", "419"),
        )
    )
    xid_errors = sel(cfg, c.XID_ERRORS.name, f'xid=~"{xids}"')
    # The exporter creates a (gpu, xid) counter at its first event, already at 1: increase() misses that
    # event, the last-seen timestamp does not.
    xid_seen = sel(cfg, c.XID_LAST_SEEN.name, f'xid=~"{xids}"')
    ecc = sel(cfg, c.ECC_ERRORS.name, 'type="uncorrected"', 'scope="volatile"')
    replays = sel(cfg, c.NVLINK_ERRORS.name, 'type=~"replay|recovery"')
    thermal = sel(cfg, c.CLOCK_EVENT.name, 'reason=~"hw_thermal_slowdown|sw_thermal_slowdown|hw_slowdown"')
    power = sel(cfg, c.CLOCK_EVENT.name, 'reason=~"sw_power_cap|hw_power_brake_slowdown"')
    return Group(
        "servescope-gpu-health",
        (
            Alert(
                "ServescopeGpuLost",
                f"{sel(cfg, c.GPU_UP.name)} == 0",
                cfg.gpu_lost_for,
                "critical",
                "A GPU is lost or needs a reset.",
                f"{ON_GPU} answers no NVML call (lost, reset required or gone from the bus); its "
                "engine is down.",
                GPU_KEYS,
                "gpu",
            ),
            Alert(
                "ServescopeGpuXidCritical",
                f"increase({xid_errors}[{w}]) > 0 or (time() - {xid_seen}) < {parse_duration(w):g}",
                cfg.event_for,
                "critical",
                "A GPU reported a critical XID error.",
                f"{ON_GPU} reported XID {{{{ $labels.xid }}}} in the last {w}; "
                "servescope_gpu_xid_last_seen_timestamp_seconds says when.",
                (*GPU_KEYS, "xid"),
                "gpu",
            ),
            Alert(
                "ServescopeGpuEccUncorrectable",
                f"increase({ecc}[{w}]) > 0",
                cfg.event_for,
                "critical",
                "Uncorrectable ECC errors on a GPU.",
                f"{ON_GPU} counted {{{{ $value | humanize }}}} uncorrectable ECC errors in the last {w}.",
                GPU_KEYS,
                "gpu",
            ),
            Alert(
                "ServescopeGpuRowRemapFailed",
                f"{sel(cfg, c.REMAPPED_ROWS_FAILED.name)} == 1",
                cfg.event_for,
                "critical",
                "A GPU memory row remap failed.",
                f"{ON_GPU} could not remap a failing memory row: the GPU needs service.",
                GPU_KEYS,
                "gpu",
            ),
            Alert(
                "ServescopeGpuRowRemapPending",
                f"{sel(cfg, c.REMAPPED_ROWS_PENDING.name)} == 1",
                cfg.hardware_for,
                "warning",
                "A GPU memory row remap waits for a reset.",
                f"{ON_GPU} has a row remap pending: drain it and reset the GPU when convenient.",
                GPU_KEYS,
                "gpu",
            ),
            Alert(
                "ServescopeNvlinkCrcErrors",
                # NVML's per-link counters; DCGM's only for a GPU where NVML reports none (both count the
                # same errors when both sources run).
                f"(sum by ({GPU_BY}) (increase({nvlink}[{w}]))"
                f" or on ({GPU_BY}) sum by ({GPU_BY}) ({dcgm_crc})) > {cfg.nvlink_crc_errors:g}",
                cfg.hardware_for,
                "warning",
                "NVLink CRC errors keep increasing on a GPU.",
                f"{ON_GPU} counted {{{{ $value | humanize }}}} NVLink CRC flit/data errors in the last {w} "
                "(DCGM fields 409/419, not 1009/1010 which are PCIe bytes).",
                GPU_KEYS,
                "gpu",
            ),
            Alert(
                "ServescopeNvlinkReplayRecovery",
                f"sum by ({GPU_BY}) (increase({replays}[{w}])) > {cfg.nvlink_replay_errors:g}",
                cfg.hardware_for,
                "warning",
                "NVLink replays or recoveries keep increasing on a GPU.",
                f"{ON_GPU} counted {{{{ $value | humanize }}}} NVLink replay/recovery events in the "
                f"last {w}.",
                GPU_KEYS,
                "gpu",
            ),
            Alert(
                "ServescopePcieReplays",
                f"increase({sel(cfg, c.PCIE_REPLAY.name)}[{w}]) > {cfg.pcie_replays:g}",
                cfg.hardware_for,
                "warning",
                "PCIe replays keep increasing on a GPU.",
                f"{ON_GPU} retransmitted {{{{ $value | humanize }}}} PCIe packets in the last {w}.",
                GPU_KEYS,
                "gpu",
            ),
            Alert(
                "ServescopeGpuThermalThrottling",
                f"max by ({GPU_BY}) ({thermal}) == 1",
                cfg.thermal_for,
                "warning",
                "A GPU is throttled by temperature.",
                f"{ON_GPU} holds its clocks down for heat (or a hardware slowdown).",
                GPU_KEYS,
                "gpu",
            ),
            Alert(
                "ServescopeGpuPowerThrottling",
                f"max by ({GPU_BY}) ({power}) == 1",
                cfg.power_for,
                "info",
                "A GPU runs at its power cap.",
                f"{ON_GPU} has been held at its power limit: throughput is bounded by power, not by "
                "batch size.",
                GPU_KEYS,
                "gpu",
            ),
        ),
    )


def memory(cfg: AlertsConfig) -> Group:
    # One declarative list of the group's alerts (see health): longer than 40 lines on purpose.
    used_peak = sel(cfg, dm.MEMORY_PEAK.name)
    total = sel(cfg, c.MEMORY_TOTAL.name)
    return Group(
        "servescope-gpu-memory",
        (
            Alert(
                "ServescopeGpuMemoryLeakSuspected",
                f"{sel(cfg, dm.LEAK_SUSPECTED.name)} == 1",
                cfg.leak_for,
                "warning",
                "GPU memory grows steadily while the load is flat.",
                f"{ON_GPU}: memory has grown steadily for 30 minutes while tokens/s and KV usage "
                "stayed flat; "
                "/api/v1/gpus on the exporter gives the rate and the reason.",
                GPU_KEYS,
                "gpu",
            ),
            Alert(
                "ServescopeGpuMemoryExhaustionSoon",
                _exhaustion_expr(cfg),
                cfg.exhaustion_for,
                "critical",
                "GPU memory will run out within the hour at its current growth.",
                f"{ON_GPU} will run out of memory in {{{{ $value | humanizeDuration }}}} at its "
                f"{cfg.exhaustion_window} growth rate.",
                GPU_KEYS,
                "gpu",
            ),
            Alert(
                "ServescopeGpuMemoryHeadroomLow",
                f"({total} - on ({GPU_BY}) {used_peak}) / on ({GPU_BY}) {total}"
                f" < {cfg.memory_headroom_ratio:g}",
                cfg.memory_headroom_for,
                "warning",
                "A GPU has almost no free memory at its peaks.",
                f"{ON_GPU} keeps only {{{{ $value | humanizePercentage }}}} of its memory free at the "
                "1 s peak.",
                GPU_KEYS,
                "gpu",
            ),
            Alert(
                "ServescopeEngineOverMemoryBudget",
                f"{sel(cfg, dm.MEMORY_OVER_BUDGET.name)} > {cfg.over_budget_bytes:.0f}",
                cfg.over_budget_for,
                "warning",
                "A serving engine holds memory beyond its gpu_memory_utilization budget.",
                "{{ $labels.model_name }} engine {{ $labels.engine }} at {{ $labels.endpoint }} holds "
                "{{ $value | humanize1024 }}B beyond its budget on GPU {{ $labels.gpu }} ({{ "
                "$labels.uuid }}).",
                ("instance", "model_name", "engine", "endpoint", "gpu", "uuid"),
                "gpu",
            ),
        ),
    )


def _exhaustion_expr(cfg: AlertsConfig) -> str:
    """Time to exhaustion at the configured window's growth, confirmed by the 5 min window.

    The 30 min growth reads a one-off step (activations sized up when load jumps) as growth for as long
    as the step is in its window, and pages on a GPU that has stopped growing; the 5 min growth has
    already gone flat then. A leak is still growing, so both windows agree.
    """
    bound = f"{cfg.exhaustion_seconds:g}"
    exhaustion = sel(cfg, dm.MEMORY_EXHAUSTION.name, f'window="{cfg.exhaustion_window}"')
    if cfg.exhaustion_window == "5m":
        return f"{exhaustion} < {bound}"
    recent = sel(cfg, dm.MEMORY_EXHAUSTION.name, 'window="5m"')
    return f"{exhaustion} < {bound} and on ({GPU_BY}) {recent} < {bound}"
