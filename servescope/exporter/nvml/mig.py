"""MIG device UUIDs mapped to the UUID of the GPU they are carved from (NVML's MIG API)."""

from __future__ import annotations

import contextlib

from servescope.exporter.nvml.errors import NvmlError
from servescope.exporter.nvml.library import NvmlLibrary

MIG_ENABLED = 1


def mig_parents(lib: NvmlLibrary) -> dict[str, str]:
    """{MIG-uuid: GPU-uuid} over every MIG-enabled GPU; GPUs or slots NVML refuses are left out."""
    parents: dict[str, str] = {}
    try:
        count = lib.device_count()
    except NvmlError:
        return parents  # NVML not initialised (yet): the caller asks again later
    for index in range(count):
        with contextlib.suppress(NvmlError):
            gpu = lib.handle(index)
            if lib.mig_mode(gpu) != MIG_ENABLED:
                continue
            parent = lib.uuid(gpu)
            for slot in range(lib.max_mig_devices(gpu)):
                with contextlib.suppress(NvmlError):
                    parents[lib.uuid(lib.mig_handle(gpu, slot))] = parent
    return parents
