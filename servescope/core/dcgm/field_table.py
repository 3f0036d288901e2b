"""DCGM field ids servescope knows: dmon short name and the DCGM_FI_* name dcgm-exporter uses.

Ids never change between DCGM versions (names did, in 4.6); everything is keyed by id.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KnownField:
    field_id: int
    short: str | None  # dmon column header; None where servescope does not know it
    name: str  # DCGM_FI_* as in dcgm_fields.h and dcgm-exporter's series names


_TABLE: list[tuple[int, str | None, str]] = [
    (100, "SMCLK", "DCGM_FI_DEV_SM_CLOCK"),
    (101, "MMCLK", "DCGM_FI_DEV_MEM_CLOCK"),
    (112, "DVCCTR", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"),
    (140, "MMTMP", "DCGM_FI_DEV_MEMORY_TEMP"),
    (150, "TMPTR", "DCGM_FI_DEV_GPU_TEMP"),
    (155, "POWER", "DCGM_FI_DEV_POWER_USAGE"),
    (156, "TOTEC", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
    (202, "RPCTR", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"),
    (203, "GPUTL", "DCGM_FI_DEV_GPU_UTIL"),
    (204, "MCUTL", "DCGM_FI_DEV_MEM_COPY_UTIL"),
    (230, "XIDER", "DCGM_FI_DEV_XID_ERRORS"),
    (240, "PVIOL", "DCGM_FI_DEV_POWER_VIOLATION"),
    (241, "TVIOL", "DCGM_FI_DEV_THERMAL_VIOLATION"),
    (250, "FBTTL", "DCGM_FI_DEV_FB_TOTAL"),
    (251, "FBFRE", "DCGM_FI_DEV_FB_FREE"),
    (252, "FBUSD", "DCGM_FI_DEV_FB_USED"),
    (253, "FBRSV", "DCGM_FI_DEV_FB_RESERVED"),
    (310, "ESVTL", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"),
    (311, "EDVTL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"),
    (312, "ESATL", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"),
    (313, "EDATL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"),
    (390, "RPSBE", "DCGM_FI_DEV_RETIRED_SBE"),
    (391, "RPDBE", "DCGM_FI_DEV_RETIRED_DBE"),
    (392, "RPPEN", "DCGM_FI_DEV_RETIRED_PENDING"),
    (393, "URMPS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"),
    (394, "CRMPS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"),
    (395, "RRF", "DCGM_FI_DEV_ROW_REMAP_FAILURE"),
    (396, "RRP", "DCGM_FI_DEV_ROW_REMAP_PENDING"),
    (409, "NFELT", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"),
    (419, "NDELT", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL"),
    (429, "NRELT", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"),
    (439, "NRCLT", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"),
    (449, "NBWLT", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"),
    (497, "NLCRC", "DCGM_FI_DEV_NVLINK_ERROR_DL_CRC"),
    (498, "NLREC", "DCGM_FI_DEV_NVLINK_ERROR_DL_RECOVERY"),
    (499, "NLREP", "DCGM_FI_DEV_NVLINK_ERROR_DL_REPLAY"),
    (1001, "GRACT", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
    (1002, "SMACT", "DCGM_FI_PROF_SM_ACTIVE"),
    (1003, "SMOCC", "DCGM_FI_PROF_SM_OCCUPANCY"),
    (1004, "TENSO", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
    (1005, "DRAMA", "DCGM_FI_PROF_DRAM_ACTIVE"),
    (1006, "FP64A", "DCGM_FI_PROF_PIPE_FP64_ACTIVE"),
    (1007, "FP32A", "DCGM_FI_PROF_PIPE_FP32_ACTIVE"),
    (1008, "FP16A", "DCGM_FI_PROF_PIPE_FP16_ACTIVE"),
    (1009, "PCITX", "DCGM_FI_PROF_PCIE_TX_BYTES"),
    (1010, "PCIRX", "DCGM_FI_PROF_PCIE_RX_BYTES"),
    (1011, "NVLTX", "DCGM_FI_PROF_NVLINK_TX_BYTES"),
    (1012, "NVLRX", "DCGM_FI_PROF_NVLINK_RX_BYTES"),
    (1200, "NLXMITP", "DCGM_FI_DEV_NVLINK_COUNT_TX_PACKETS"),
]

# NVLink5 packet and error counters, ids 1201-1213 in this order (DCGM_FI_DEV_NVLINK_COUNT_<name>): dmon
# has no short name for them.
_NVLINK5_COUNTS = (
    "TX_BYTES",
    "RX_PACKETS",
    "RX_BYTES",
    "RX_MALFORMED_PACKET_ERRORS",
    "RX_BUFFER_OVERRUN_ERRORS",
    "RX_ERRORS",
    "RX_REMOTE_ERRORS",
    "RX_GENERAL_ERRORS",
    "LOCAL_LINK_INTEGRITY_ERRORS",
    "TX_DISCARDS",
    "LINK_RECOVERY_SUCCESSFUL_EVENTS",
    "LINK_RECOVERY_FAILED_EVENTS",
    "LINK_RECOVERY_EVENTS",
)

# Per-link NVLink counters: link n of each kind has its own id (L0-L8, L9-L14, L15-L17).
_PER_LINK = {
    "CRC_FLIT": [*range(400, 409), *range(451, 457), *range(481, 484)],
    "CRC_DATA": [*range(410, 419), *range(457, 463), *range(484, 487)],
    "REPLAY": [*range(420, 429), *range(463, 469), *range(487, 490)],
    "RECOVERY": [*range(430, 439), *range(469, 475), *range(491, 494)],
}

KNOWN: dict[int, KnownField] = {fid: KnownField(fid, short, name) for fid, short, name in _TABLE}
for _fid, _count in enumerate(_NVLINK5_COUNTS, start=1201):
    KNOWN[_fid] = KnownField(_fid, None, f"DCGM_FI_DEV_NVLINK_COUNT_{_count}")
LINK_OF: dict[int, int] = {}
for _kind, _ids in _PER_LINK.items():
    for _link, _fid in enumerate(_ids):
        KNOWN[_fid] = KnownField(_fid, None, f"DCGM_FI_DEV_NVLINK_{_kind}_ERROR_COUNT_L{_link}")
        LINK_OF[_fid] = _link

BY_NAME: dict[str, KnownField] = {f.name: f for f in KNOWN.values()}
BY_SHORT: dict[str, KnownField] = {f.short: f for f in KNOWN.values() if f.short}


def short_name(field_id: int) -> str:
    known = KNOWN.get(field_id)
    return known.short if known and known.short else str(field_id)
