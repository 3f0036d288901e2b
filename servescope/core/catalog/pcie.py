"""The PCIe link a GPU trained: its current and maximum generation and width, from NVML.

Kept apart from the catalog's main module; the catalog lists both. GPUs drop to a lower generation at
idle to save power, so only the width is comparable with its maximum at any time; the generation is
comparable under load (the alerts use the highest generation seen over a window while the GPU is busy).
"""

from __future__ import annotations

from servescope.core.catalog.spec import GPU_LABELS, MetricSpec
from servescope.core.catalog.spec import gauge as _gauge

G = GPU_LABELS

PCIE_LINK_GENERATION = _gauge(
    "servescope_gpu_pcie_link_generation",
    "PCIe generation the GPU's link runs at now (nvmlDeviceGetCurrPcieLinkGeneration); lower at idle "
    "by design (power saving).",
    G,
    "nvml",
)
PCIE_LINK_MAX_GENERATION = _gauge(
    "servescope_gpu_pcie_link_max_generation",
    "Highest PCIe generation the link can train at, GPU and slot together "
    "(nvmlDeviceGetMaxPcieLinkGeneration).",
    G,
    "nvml",
)
PCIE_LINK_WIDTH = _gauge(
    "servescope_gpu_pcie_link_width",
    "PCIe lanes the GPU's link runs on now (nvmlDeviceGetCurrPcieLinkWidth).",
    G,
    "nvml",
)
PCIE_LINK_MAX_WIDTH = _gauge(
    "servescope_gpu_pcie_link_max_width",
    "PCIe lanes the link can train at (nvmlDeviceGetMaxPcieLinkWidth).",
    G,
    "nvml",
)
PCIE_LINK: tuple[MetricSpec, ...] = (
    PCIE_LINK_GENERATION,
    PCIE_LINK_MAX_GENERATION,
    PCIE_LINK_WIDTH,
    PCIE_LINK_MAX_WIDTH,
)
