"""MIG devices: each one's UUID mapped to the GPU it is carved from and its GPU and compute instance."""

from __future__ import annotations

import contextlib

from servescope.exporter.nvml.errors import NvmlError
from servescope.exporter.nvml.library import NvmlLibrary

MIG_ENABLED = 1
# (parent GPU UUID, GPU instance id, compute instance id); an id NVML refuses is "".
Slice = tuple[str, str, str]


def mig_slices(lib: NvmlLibrary) -> dict[str, Slice]:
    """{MIG-uuid: (GPU-uuid, GI, CI)} over every MIG-enabled GPU; GPUs or slots NVML refuses are left out."""
    slices: dict[str, Slice] = {}
    try:
        count = lib.device_count()
    except NvmlError:
        return slices  # NVML not initialised (yet): the caller asks again later
    for index in range(count):
        with contextlib.suppress(NvmlError):
            gpu = lib.handle(index)
            if lib.mig_mode(gpu) != MIG_ENABLED:
                continue
            parent = lib.uuid(gpu)
            for slot in range(lib.max_mig_devices(gpu)):
                with contextlib.suppress(NvmlError):
                    mig = lib.mig_handle(gpu, slot)
                    instances = ("", "")
                    with contextlib.suppress(NvmlError):
                        instances = tuple(map(str, lib.mig_instances(mig)))  # type: ignore[assignment]
                    slices[lib.uuid(mig)] = (parent, *instances)
    return slices


def mig_parents(lib: NvmlLibrary) -> dict[str, str]:
    """{MIG-uuid: GPU-uuid} over every MIG-enabled GPU."""
    return {mig: parent for mig, (parent, _, _) in mig_slices(lib).items()}
