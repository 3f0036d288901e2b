"""promtool input series the alert cases of several modules share: GPU facts, engine placement, XIDs,
NVLink error counters."""

from __future__ import annotations

from tests.alerts.promtool import GPU, ON_GPU, series

GIB = 1024**3
GPU1 = {**GPU, "gpu": "1", "uuid": "GPU-0001"}
# One error a minute on each of two series from minute 10 to minute 30, flat before and after: the 10m
# increase summed over the GPU exceeds 10 from minute 16 (pending), fires at 26, ends by 36.
BURST = "0x10 1+1x19 20x20"
QUIET = "0x50"
NVLINK = "servescope_gpu_nvlink_errors_total"
CRC = "ServescopeNvlinkCrcErrors"


def gpu_facts(gpu: dict[str, str], values: str, pci_bus_id: str = "0000:18:00.0") -> dict[str, str]:
    """servescope_gpu_info of a GPU: where the engine alerts find its hostname."""
    facts = {"gpu_model": "H100", "pci_bus_id": pci_bus_id, "driver_version": "550", "mig_mode": "0"}
    return series("servescope_gpu_info", {**gpu, **facts}, values)


def engine_gpu_info(engine: dict[str, str], gpu: dict[str, str], pid: str, values: str) -> dict[str, str]:
    """servescope_engine_gpu_info of one engine process on one GPU (the exporter's labels, value 1)."""
    return series(
        "servescope_engine_gpu_info", {**engine, "uuid": gpu["uuid"], "gpu": gpu["gpu"], "pid": pid}, values
    )


def xid_event(labels: dict[str, str], count: str, last_seen: str) -> list[dict[str, str]]:
    """The two series of one (GPU, XID): its error counter and the timestamp of its last event."""
    return [
        series("servescope_gpu_xid_errors_total", labels, count),
        series("servescope_gpu_xid_last_seen_timestamp_seconds", labels, last_seen),
    ]


def xid_description(xid: str) -> str:
    """ServescopeGpuXidCritical's description for XID `xid` on GPU 0."""
    return (
        f"{ON_GPU} reported XID {xid} in the last 10m (kept 24h after: the GPU stays broken until it is "
        "reset); servescope_gpu_xid_last_seen_timestamp_seconds says when."
    )


def nvlink_errors(kinds: dict[str, str], labels: dict[str, str] = GPU) -> list[dict[str, str]]:
    """The NVML error series of a GPU (one per type, summed over its links); `kinds` gives those not QUIET."""
    return [
        series(NVLINK, {**labels, "type": kind}, kinds.get(kind, QUIET))
        for kind in ("crc_flit", "crc_data", "replay", "recovery")
    ]


def crc_description(count: int) -> str:
    """ServescopeNvlinkCrcErrors' description for `count` errors on GPU 0."""
    return (
        f"{ON_GPU} counted {count} NVLink CRC errors in the last 10m (NVML summed over links, else DCGM "
        "fields 409/419, 1206/1209 on NVLink5, or 497; not 1009/1010, which are PCIe bytes)."
    )
