"""GPU health alerts: lost GPUs, XIDs, ECC, row remapping, NVLink, PCIe, throttling."""

from __future__ import annotations

from servescope.bundle.alerts.exprs import GPU_BY, ON_GPU
from servescope.bundle.alerts.model import GPU_KEYS, Alert, Group
from servescope.core import catalog as c
from servescope.core.catalog.pcie import (
    PCIE_LINK_GENERATION,
    PCIE_LINK_MAX_GENERATION,
    PCIE_LINK_MAX_WIDTH,
    PCIE_LINK_WIDTH,
)
from servescope.core.config import AlertsConfig
from servescope.core.durations import parse_duration
from servescope.core.topology import sel

# NVLink CRC counters of DCGM by field, summed over links: 409/419 (flit/data) and their NVLink5
# fallbacks 1206/1209 (watched only where 409/419 are unsupported, so never both on one GPU); 497
# (data-link CRC on newer drivers) only for a GPU that reports none of them.
DCGM_CRC = (
    ("servescope_dcgm_nvlink_crc_flit_errors_total", "409"),
    ("servescope_dcgm_nvlink_crc_data_errors_total", "419"),
    ("servescope_dcgm_nvlink5_rx_errors_total", "1206"),
    ("servescope_dcgm_nvlink5_link_integrity_errors_total", "1209"),
)
DCGM_DL_CRC = "servescope_dcgm_nvlink_dl_crc_errors_total"
# A GPU counts as one with NVLink when a link of it was active within this window (PCIe cards never are).
NVLINK_USED_WINDOW = "1d"


def crc_errors(cfg: AlertsConfig) -> str:
    """NVLink CRC errors per GPU over hardware_window: NVML's counters (summed over links), else DCGM's."""
    w = cfg.hardware_window
    nvml = sel(cfg, c.NVLINK_ERRORS.name, 'type=~"crc_flit|crc_data"')
    # Labelled apart by field so that `or` keeps every field of a GPU.
    dcgm = " or ".join(
        f'label_replace(increase({sel(cfg, name)}[{w}]), "field_id", "{field}", "", "")'
        for name, field in DCGM_CRC
    )
    return (
        f"(sum by ({GPU_BY}) (increase({nvml}[{w}]))"
        f" or on (instance, uuid) sum by ({GPU_BY}) ({dcgm})"
        f" or on (instance, uuid) sum by ({GPU_BY}) (increase({sel(cfg, DCGM_DL_CRC)}[{w}])))"
    )


def pcie_link_degraded(cfg: AlertsConfig) -> str:
    """GPUs whose PCIe link runs below its maximum: `degraded` says which part, the value is the current one.

    The width is compared always. The generation only under load: an idle GPU lowers it to save power, so
    the highest generation seen over hardware_window must reach the maximum while the GPU was busy.
    """
    w = cfg.hardware_window
    on_gpu = f"on ({GPU_BY})"
    width = f"max by ({GPU_BY}) ({sel(cfg, PCIE_LINK_WIDTH.name)})"
    max_width = f"max by ({GPU_BY}) ({sel(cfg, PCIE_LINK_MAX_WIDTH.name)})"
    generation = f"max by ({GPU_BY}) (max_over_time({sel(cfg, PCIE_LINK_GENERATION.name)}[{w}]))"
    max_generation = f"max by ({GPU_BY}) ({sel(cfg, PCIE_LINK_MAX_GENERATION.name)})"
    busy = f"max by ({GPU_BY}) (avg_over_time({sel(cfg, c.UTILIZATION.name)}[{w}]))"
    narrow = f"{width} < {on_gpu} {max_width}"
    slow = f"{generation} < {on_gpu} {max_generation} and {on_gpu} {busy} > {cfg.pcie_link_busy_ratio:g}"
    return (
        f'label_replace({narrow}, "degraded", "width", "", "")'
        f' or label_replace({slow}, "degraded", "generation", "", "")'
    )


def xid_expr(cfg: AlertsConfig, xids: tuple[int, ...]) -> str:
    """One of `xids` in the last hardware_window on a GPU.

    The exporter creates a (gpu, xid) counter at its first event, already at 1: increase() misses that
    event, the last-seen timestamp does not.
    """
    w = cfg.hardware_window
    codes = "|".join(str(x) for x in xids)
    errors = sel(cfg, c.XID_ERRORS.name, f'xid=~"{codes}"')
    seen = sel(cfg, c.XID_LAST_SEEN.name, f'xid=~"{codes}"')
    return f"increase({errors}[{w}]) > 0 or (time() - {seen}) < {parse_duration(w):g}"


def nvlink_down(cfg: AlertsConfig) -> str:
    """Links down per GPU, on a GPU that had an active link within the last day (a GPU with NVLink at all)."""
    links, links_up = sel(cfg, c.NVLINK_LINKS.name), sel(cfg, c.NVLINK_LINKS_UP.name)
    used = f"max by (instance, uuid) (max_over_time({links_up}[{NVLINK_USED_WINDOW}])) > 0"
    return f"max by ({GPU_BY}) ({links} - {links_up} > 0) and on (instance, uuid) ({used})"


def nvml_lost(cfg: AlertsConfig) -> str:
    """Nodes whose exporter is scraped but exports no GPU series, although it did within nvml_lost_window.

    A node-wide NVML failure drops every NVML series: ServescopeGpuLost (gpu_up == 0) cannot fire.
    """
    gpu_up = sel(cfg, c.GPU_UP.name)
    had = f"count by (instance, hostname) (max_over_time({gpu_up}[{cfg.nvml_lost_window}]))"
    has = f"count by (instance, hostname) ({gpu_up})"
    return f"{had} unless on (instance, hostname) {has} and on (instance) up{{{cfg.selector}}} == 1"


def health(cfg: AlertsConfig) -> Group:
    # One tuple of rule declarations: long by nature, not by logic. Every alert here is a ticket: a broken
    # GPU is a cause; the latency and availability pages say when users feel it.
    w = cfg.hardware_window
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
                "warning",
                "A GPU is lost or needs a reset.",
                f"{ON_GPU} answers no NVML call (lost, reset required or gone from the bus); its "
                "engine is down.",
                GPU_KEYS,
                "gpu",
            ),
            Alert(
                "ServescopeGpuNodeNvmlLost",
                nvml_lost(cfg),
                cfg.gpu_lost_for,
                "warning",
                "A node's exporter answers but reports none of the GPUs it had.",
                "{{ $labels.hostname }} ({{ $labels.instance }}) had {{ $value }} GPUs in the last "
                f"{cfg.nvml_lost_window} and reports none now, while its exporter answers: NVML fails "
                "node-wide (driver not loaded, driver/library version mismatch, every GPU gone).",
                ("instance", "hostname"),
                "gpu",
            ),
            Alert(
                "ServescopeGpuXidCritical",
                xid_expr(cfg, cfg.critical_xids),
                cfg.event_for,
                "warning",
                "A GPU reported a critical XID error.",
                f"{ON_GPU} reported XID {{{{ $labels.xid }}}} in the last {w} (kept "
                f"{cfg.xid_keep_firing_for} after: the GPU stays broken until it is reset); "
                "servescope_gpu_xid_last_seen_timestamp_seconds says when.",
                (*GPU_KEYS, "xid"),
                "gpu",
                keep_firing_for=cfg.xid_keep_firing_for,
            ),
            Alert(
                "ServescopeGpuXidDrainSoon",
                xid_expr(cfg, cfg.drain_xids),
                cfg.event_for,
                "warning",
                "A GPU reported an XID that needs a drain and reset when convenient.",
                f"{ON_GPU} reported XID {{{{ $labels.xid }}}} in the last {w} (kept "
                f"{cfg.xid_keep_firing_for} after): memory rows were retired or remapped, or single-bit "
                "errors are frequent; drain and reset it in a quiet hour.",
                (*GPU_KEYS, "xid"),
                "gpu",
                keep_firing_for=cfg.xid_keep_firing_for,
            ),
            Alert(
                "ServescopeGpuEccUncorrectable",
                f"increase({ecc}[{w}]) > 0",
                cfg.event_for,
                "warning",
                "Uncorrectable ECC errors on a GPU.",
                f"{ON_GPU} counted {{{{ $value | humanize }}}} uncorrectable ECC errors in the last {w}.",
                GPU_KEYS,
                "gpu",
            ),
            Alert(
                "ServescopeGpuRowRemapFailed",
                f"{sel(cfg, c.REMAPPED_ROWS_FAILED.name)} == 1",
                cfg.event_for,
                "warning",
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
                # NVML's counters summed over links; DCGM's only for a GPU where NVML reports none (both
                # count the same errors when both sources run). A short `for`: a burst that leaves the
                # window within 10 minutes (often the last sign before a link dies) must still alert.
                f"{crc_errors(cfg)} > {cfg.nvlink_crc_errors:g}",
                cfg.nvlink_crc_for,
                "warning",
                "NVLink CRC errors keep increasing on a GPU.",
                f"{ON_GPU} counted {{{{ $value | humanize }}}} NVLink CRC errors in the last {w} "
                "(NVML summed over links, else DCGM fields 409/419, 1206/1209 on NVLink5, or 497; not "
                "1009/1010, which are PCIe bytes).",
                GPU_KEYS,
                "interconnect",
            ),
            Alert(
                "ServescopeNvlinkLinkDown",
                nvlink_down(cfg),
                cfg.hardware_for,
                "warning",
                "An NVLink link of a GPU is down.",
                f"{ON_GPU}: {{{{ $value }}}} NVLink link(s) inactive while the GPU had active links "
                f"in the last {NVLINK_USED_WINDOW}: its traffic takes fewer links or PCIe, and NCCL may "
                "fail.",
                GPU_KEYS,
                "interconnect",
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
                "interconnect",
            ),
            Alert(
                "ServescopePcieReplays",
                f"increase({sel(cfg, c.PCIE_REPLAY.name)}[{w}]) > {cfg.pcie_replays:g}",
                cfg.hardware_for,
                "warning",
                "PCIe replays keep increasing on a GPU.",
                f"{ON_GPU} retransmitted {{{{ $value | humanize }}}} PCIe packets in the last {w}.",
                GPU_KEYS,
                "interconnect",
            ),
            Alert(
                "ServescopePcieLinkDegraded",
                pcie_link_degraded(cfg),
                cfg.pcie_link_for,
                "warning",
                "A GPU's PCIe link runs below the generation or width it can train at.",
                f"{ON_GPU}: its PCIe link {{{{ $labels.degraded }}}} is {{{{ $value }}}}, below the maximum "
                "of GPU and slot (servescope_gpu_pcie_link_max_{{ $labels.degraded }}): weight loading "
                "and host transfers run slower; reseat the GPU or check its riser and slot.",
                GPU_KEYS,
                "interconnect",
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
