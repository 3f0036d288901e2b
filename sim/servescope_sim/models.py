"""Published figures of the GPUs the simulator can pretend to be."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class GpuModel:
    name: str  # as nvmlDeviceGetName reports it
    memory_bytes: int
    reserved_bytes: int
    power_limit_watts: float
    idle_watts: float
    sm_clock_mhz: int
    memory_clock_mhz: int
    nvlinks: int
    pcie_generation: int = 5  # the highest the GPU and its slot train at
    pcie_width: int = 16


MODELS: dict[str, GpuModel] = {
    "H200": GpuModel("NVIDIA H200", 143_771 * MIB, 542 * MIB, 700.0, 90.0, 1980, 3201, 18),
    "H100": GpuModel("NVIDIA H100 80GB HBM3", 81_559 * MIB, 542 * MIB, 700.0, 70.0, 1980, 2619, 18),
    "A100": GpuModel(
        "NVIDIA A100-SXM4-80GB", 81_920 * MIB, 512 * MIB, 400.0, 55.0, 1410, 1593, 12, pcie_generation=4
    ),
    "L40S": GpuModel("NVIDIA L40S", 46_068 * MIB, 430 * MIB, 350.0, 35.0, 2520, 9001, 0, pcie_generation=4),
}
