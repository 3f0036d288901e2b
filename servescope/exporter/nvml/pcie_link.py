"""The samples of a GPU's PCIe link: current and maximum generation and width, as NVML reports them."""

from __future__ import annotations

from servescope.core.catalog.pcie import (
    PCIE_LINK_GENERATION,
    PCIE_LINK_MAX_GENERATION,
    PCIE_LINK_MAX_WIDTH,
    PCIE_LINK_WIDTH,
)
from servescope.exporter.exposition import Sample


def pcie_link_samples(labels: tuple[str, ...], link: tuple[int, int, int, int]) -> list[Sample]:
    """`link` is (generation, max generation, width, max width), from NvmlLibrary.pcie_link."""
    generation, max_generation, width, max_width = link
    return [
        Sample(PCIE_LINK_GENERATION, labels, generation),
        Sample(PCIE_LINK_MAX_GENERATION, labels, max_generation),
        Sample(PCIE_LINK_WIDTH, labels, width),
        Sample(PCIE_LINK_MAX_WIDTH, labels, max_width),
    ]
