"""Interconnect: NVLink link state, errors and traffic, PCIe traffic and replays, per GPU.

NVLink CRC errors come from NVML summed over links (servescope_gpu_nvlink_errors_total; per link with
--nvlink-per-link, and link by link in the GPU API and the nvlink_errors runbook step) and from DCGM
summed over links (fields 409/419, 429/439; 1206/1209/1212 on Blackwell). DCGM fields 1009/1010, which
the operators watched "for NVLink CRC errors", are PCIe bytes per second: they appear here as PCIe traffic.
"""

from __future__ import annotations

import grafanalib.core as g

from servescope.bundle.dashboards.common import (
    GPU,
    ON_GPU,
    count_stat,
    gpu_rate,
    m,
    make_dashboard,
    per_gpu,
    stat,
    ts,
)
from servescope.core.config import AlertsConfig

NVLINK_ERRORS = "servescope_gpu_nvlink_errors_total"
LINKS, LINKS_UP = "servescope_gpu_nvlink_links", "servescope_gpu_nvlink_links_up"
CRC = 'type=~"crc_flit|crc_data"'
REPLAY = 'type=~"replay|recovery"'
NOT_CRC = "DCGM fields 1009/1010 are PCIe bytes per second, not NVLink CRC errors (409/419)."


def nvlink_rate(error_type: str) -> str:
    """Per-GPU rate of NVML NVLink errors of one type (or `a|b`), summed over the GPU's links."""
    matcher = ('type=~"' if "|" in error_type else 'type="') + error_type + '"'
    return gpu_rate(NVLINK_ERRORS, matcher)


def dcgm_rate(metric: str, field: str, fallback: str = "", fallback_field: str = "") -> str:
    """Rate of a DCGM counter labelled with its field id; OR its Blackwell fallback (watched only where
    the field is unsupported, so the two never describe the same GPU)."""
    expr = f'label_replace({gpu_rate(metric)}, "field", "{field}", "", "")'
    if fallback:
        expr += f' or label_replace({gpu_rate(fallback)}, "field", "{fallback_field}", "", "")'
    return expr


def dashboard(cfg: AlertsConfig) -> g.Dashboard:
    """The dashboard, its thresholds and links from `cfg`."""
    # Long by nature: one declaration, the dashboard's panels in reading order.
    window = cfg.hardware_window
    return make_dashboard(
        cfg,
        "interconnect",
        "NVLink link state, CRC/replay/recovery errors (NVML and DCGM, per GPU) and traffic; PCIe "
        f"traffic and replays. {NOT_CRC} The operators' `dcgmi dmon -e 1009,1010` watched PCIe traffic.",
        [
            stat(
                "NVLink links up",
                [(f"sum({m('servescope_gpu_nvlink_links_up', GPU)})", "up")],
                "none",
                width=8,
                description="Active NVLink links over the selected GPUs (NVML).",
            ),
            count_stat(
                "NVLink links down",
                f"sum({m(LINKS, GPU)} - {m(LINKS_UP, GPU)})",
                "down",
                width=8,
                description="Links NVML reports inactive. A link down on a GPU whose peers' are up forces "
                "its "
                "traffic over fewer links or PCIe.",
            ),
            stat(
                "GPUs with NVLink CRC errors (last " + window + ")",
                [
                    (
                        f"count(sum by (hostname, gpu) (increase({m(NVLINK_ERRORS, GPU, CRC)}[{window}])) "
                        f"> 0)"
                        " or vector(0)",
                        "GPUs",
                    )
                ],
                "none",
                width=8,
                thresholds=[1],
                description=f"GPUs whose NVML NVLink CRC (flit + data) counters grew in the last {window}.",
            ),
            ts(
                "Active NVLink links per GPU",
                [(f"sum by (hostname, gpu) ({m(LINKS_UP, GPU)})", ON_GPU)],
                "none",
                description="Links NVML reports active on each GPU; a drop is a link gone down.",
            ),
            ts(
                "NVLink CRC errors per GPU (alert window)",
                [
                    (
                        f"sum by (hostname, gpu) (increase({m(NVLINK_ERRORS, GPU, CRC)}[{window}]))",
                        ON_GPU,
                    )
                ],
                "none",
                thresholds=[cfg.nvlink_crc_errors],
                description=f"NVML CRC flit + data errors over all links of a GPU in the last {window}: the "
                "ServescopeNvlinkCrcErrors expression. Above the red line for "
                f"{cfg.hardware_for} it fires. {NOT_CRC}",
            ),
            ts(
                "NVLink CRC flit errors per GPU (NVML)",
                [(nvlink_rate("crc_flit"), ON_GPU)],
                "ops",
                description="Flow-control-unit CRC errors per second over the links of each GPU. Which "
                "link: the "
                "nvlink_errors runbook step (errors on one link point at its cable, bridge or connector; on "
                "all links of a GPU, at the GPU or NVSwitch).",
            ),
            ts(
                "NVLink CRC data errors per GPU (NVML)",
                [(nvlink_rate("crc_data"), ON_GPU)],
                "ops",
                description="Data CRC errors per second over the links of each GPU. Each is retransmitted (a "
                "replay): they cost bandwidth before they cost correctness.",
            ),
            ts(
                "NVLink replay and recovery per GPU (NVML)",
                [(nvlink_rate("replay|recovery"), ON_GPU + " {{type}}")],
                "ops",
                description="Replays (a packet re-sent after a CRC error) and recoveries (the link "
                "retrained) "
                "per second over the links of each GPU. Recoveries stall the link: even a few matter.",
            ),
            ts(
                "NVLink replay and recovery per GPU (alert window)",
                [
                    (
                        f"sum by (hostname, gpu) (increase({m(NVLINK_ERRORS, GPU, REPLAY)}[{window}]))",
                        ON_GPU,
                    )
                ],
                "none",
                thresholds=[cfg.nvlink_replay_errors],
                description=f"Replays + recoveries over all links of a GPU in the last {window}: the "
                f"ServescopeNvlinkReplayRecovery expression; above the red line for {cfg.hardware_for} it "
                "fires.",
            ),
            ts(
                "NVLink CRC errors per GPU (DCGM 409/419)",
                [
                    (
                        dcgm_rate(
                            "servescope_dcgm_nvlink_crc_flit_errors_total",
                            "409 CRC flit",
                            "servescope_dcgm_nvlink5_rx_errors_total",
                            "1206 NVLink5 rx errors",
                        ),
                        ON_GPU + " {{field}}",
                    ),
                    (
                        dcgm_rate(
                            "servescope_dcgm_nvlink_crc_data_errors_total",
                            "419 CRC data",
                            "servescope_dcgm_nvlink5_link_integrity_errors_total",
                            "1209 NVLink5 link integrity",
                        ),
                        ON_GPU + " {{field}}",
                    ),
                ],
                "ops",
                description="The same errors seen by DCGM, summed over links, per second: a second view "
                "where "
                "NVML's per-link counters are missing (Blackwell reports fields 1206/1209 instead). "
                + NOT_CRC,
            ),
            ts(
                "NVLink replay and recovery per GPU (DCGM 429/439)",
                [
                    (
                        dcgm_rate("servescope_dcgm_nvlink_replay_errors_total", "429 replay"),
                        ON_GPU + " {{field}}",
                    ),
                    (
                        dcgm_rate(
                            "servescope_dcgm_nvlink_recovery_errors_total",
                            "439 recovery",
                            "servescope_dcgm_nvlink5_recovery_failed_events_total",
                            "1212 NVLink5 failed recoveries",
                        ),
                        ON_GPU + " {{field}}",
                    ),
                ],
                "ops",
                description="DCGM's replay and recovery counters summed over links, per second (Blackwell: "
                "failed recoveries, field 1212).",
            ),
            ts(
                "NVLink traffic per GPU (DCGM 1011/1012)",
                per_gpu(
                    "servescope_dcgm_nvlink_tx_bytes_per_second",
                    "servescope_dcgm_nvlink_rx_bytes_per_second",
                    legends=("tx", "rx"),
                ),
                "Bps",
                description="NVLink transmit and receive throughput (DCGM 1011/1012, bytes/s): "
                "tensor-parallel "
                "all-reduce traffic. Compare GPUs of one engine: they should move about the same.",
            ),
            ts(
                "PCIe traffic per GPU (DCGM 1009/1010)",
                per_gpu(
                    "servescope_dcgm_pcie_tx_bytes_per_second",
                    "servescope_dcgm_pcie_rx_bytes_per_second",
                    legends=("tx", "rx"),
                ),
                "Bps",
                description="PCIe transmit and receive throughput (bytes/s). " + NOT_CRC + " High PCIe "
                "upstream traffic comes with wide beam search, host offload or a tensor-parallel group "
                "falling back from NVLink.",
            ),
            ts(
                "PCIe replays per GPU",
                [
                    (gpu_rate("servescope_gpu_pcie_replay_errors_total"), ON_GPU + " NVML"),
                    (
                        gpu_rate("servescope_dcgm_pcie_replay_errors_total"),
                        ON_GPU + " DCGM 202",
                    ),
                ],
                "ops",
                description="PCIe link retransmissions per second, from NVML and from DCGM (field 202): "
                "the same "
                "counter twice, never add them. A steady rate points at a riser, slot or signal-integrity "
                "problem.",
            ),
            ts(
                "PCIe replays per GPU (alert window)",
                [(f"increase({m('servescope_gpu_pcie_replay_errors_total', GPU)}[{window}])", ON_GPU)],
                "none",
                thresholds=[cfg.pcie_replays],
                description=f"NVML PCIe replays in the last {window}: the ServescopePcieReplays "
                f"expression; above the "
                f"red line for {cfg.hardware_for} it fires.",
            ),
        ],
        filters=["hostname", "gpu"],
    )
