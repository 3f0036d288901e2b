"""Device IDs as the kubelet reports them, resolved to the UUID of the physical GPU they run on.

- `nvidia.com/gpu` (and renamed shares such as `nvidia.com/gpu.shared`): the NVIDIA device plugin
  reports GPU UUIDs; with time-slicing each replica is `<uuid>::<n>`; with DEVICE_ID_STRATEGY=index,
  the NVML index.
- `nvidia.com/mig-<profile>`: a MIG device UUID (`MIG-<uuid>`, resolved to its parent through NVML's
  MIG API), or the older `MIG-GPU-<parent uuid>/<gi>/<ci>` that names the parent itself.
- DRA claims (`dynamic_resources`): the NVIDIA DRA driver (`gpu.nvidia.com`) names a whole GPU
  `gpu-<index>` and a MIG device `gpu-<index>-mig-...`; a GPU UUID anywhere in the device or CDI
  names is taken as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
DRA_GPU_DRIVER = "gpu.nvidia.com"
_GPU_UUID = re.compile(r"GPU-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_DRA_DEVICE = re.compile(r"^gpu-(\d+)(?:-mig-.*)?$")
_MAX_ID = 256  # longer IDs are no GPU's and are not parsed


# A MIG device as the kubelet names it: (MIG UUID or the legacy device ID, GPU instance, compute instance).
MigSlice = tuple[str, str, str]
_LEGACY_MIG = re.compile(r"^MIG-(GPU-[0-9a-fA-F-]{36})/(\d+)/(\d+)$")


def _no_slice(_: str) -> tuple[str, str, str] | None:
    return None


@dataclass(frozen=True, slots=True)
class GpuNaming:
    """What resolving needs from NVML: index -> UUID, and (on demand) MIG UUID -> parent UUID, and
    MIG UUID -> (parent UUID, GPU instance, compute instance)."""

    uuids_by_index: Mapping[str, str]
    mig_parent: Callable[[str], str | None]
    mig_slice: Callable[[str], tuple[str, str, str] | None] = _no_slice


def is_gpu_resource(resource: str) -> bool:
    return resource == GPU_RESOURCE or resource.startswith((f"{GPU_RESOURCE}.", MIG_RESOURCE_PREFIX))


def device_gpu(resource: str, device_id: str, naming: GpuNaming) -> str | None:
    """The physical GPU's UUID behind one device-plugin device ID, or None when it names none."""
    if not is_gpu_resource(resource) or len(device_id) > _MAX_ID:
        return None
    base = device_id.split("::", 1)[0]  # time-slicing replicas: <id>::<n>
    if base.startswith("MIG-GPU-"):
        found = _GPU_UUID.search(base)
        return found.group(0) if found else None
    if base.startswith("MIG-"):
        return naming.mig_parent(base)
    if base.isdigit():
        return naming.uuids_by_index.get(base)
    return base if _GPU_UUID.fullmatch(base) else None


def device_slice(resource: str, device_id: str, naming: GpuNaming) -> MigSlice | None:
    """The MIG slice one device-plugin device ID names (mixed strategy: nvidia.com/mig-<profile>), None
    for a whole GPU or a slice NVML does not describe."""
    if not resource.startswith(MIG_RESOURCE_PREFIX) or len(device_id) > _MAX_ID:
        return None
    base = device_id.split("::", 1)[0]
    legacy = _LEGACY_MIG.match(base)
    if legacy is not None:
        return base, legacy.group(2), legacy.group(3)
    described = naming.mig_slice(base) if base.startswith("MIG-") else None
    return None if described is None else (base, described[1], described[2])


def claim_gpu(driver: str, device_name: str, cdi_names: Iterable[str], naming: GpuNaming) -> str | None:
    """The physical GPU's UUID behind one DRA claim device, or None when it names no GPU."""
    for name in (device_name, *cdi_names):
        found = _GPU_UUID.search(name[:_MAX_ID])
        if found:
            return found.group(0)
    indexed = _DRA_DEVICE.match(device_name[:_MAX_ID]) if driver == DRA_GPU_DRIVER else None
    return naming.uuids_by_index.get(indexed.group(1)) if indexed else None
