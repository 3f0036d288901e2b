"""The PCIe link series of the NVML source, against the simulator: idle downtraining, a narrow link,
a GPU whose driver does not answer the link calls."""

from __future__ import annotations

import pynvml

from servescope.core import catalog as c
from servescope.core.catalog.pcie import (
    PCIE_LINK_GENERATION,
    PCIE_LINK_MAX_GENERATION,
    PCIE_LINK_MAX_WIDTH,
    PCIE_LINK_WIDTH,
)
from servescope.exporter.exposition import Sample
from servescope.exporter.nvml.collector import NvmlSource
from servescope.exporter.nvml.library import NvmlLibrary
from servescope_sim.fleet import SimulatedFleet
from servescope_sim.pynvml_module import SimulatedPynvml
from tests.helpers import FakeClock, values


def _stack(model: str = "H200") -> tuple[SimulatedFleet, SimulatedPynvml, NvmlSource, FakeClock]:
    clock = FakeClock()
    fleet = SimulatedFleet(2, model, seed=7, clock=clock)
    module = SimulatedPynvml(fleet)
    return (
        fleet,
        module,
        NvmlSource(NvmlLibrary(module), hostname="node-a", xid_events=False, monotonic=clock),
        clock,
    )


def _link(samples: list[Sample], gpu: str) -> tuple[list[float], ...]:
    return tuple(
        values(samples, spec.name, gpu=gpu)
        for spec in (PCIE_LINK_GENERATION, PCIE_LINK_MAX_GENERATION, PCIE_LINK_WIDTH, PCIE_LINK_MAX_WIDTH)
    )


def _settled(fleet: SimulatedFleet, source: NvmlSource, clock: FakeClock) -> list[Sample]:
    fleet.set_load(0, 0.9)
    fleet.set_load(1, 0.0)
    for _ in range(30):  # the load drifts to its target over a few steps
        clock.advance(1.0)
        samples = source.collect().samples
    return samples


def test_a_busy_link_runs_at_its_maximum_and_an_idle_one_drops_its_generation() -> None:
    fleet, _, source, clock = _stack()
    samples = _settled(fleet, source, clock)
    assert _link(samples, "0") == ([5], [5], [16], [16])
    assert _link(samples, "1") == ([1], [5], [16], [16])  # power saving, not a fault
    # A supported field is not listed: field_supported names only the missing ones.
    assert values(samples, c.GPU_FIELD_SUPPORTED.name, gpu="0", field="pcie_link") == []


def test_a_link_trained_at_fewer_lanes_reads_below_its_maximum_width() -> None:
    fleet, module, source, clock = _stack(model="A100")
    module.pcie_trained_width[0] = 8
    samples = _settled(fleet, source, clock)
    assert _link(samples, "0") == ([4], [4], [8], [16])
    assert _link(samples, "1") == ([1], [4], [16], [16])


def test_a_gpu_that_does_not_answer_the_link_calls_omits_them_and_says_so() -> None:
    fleet, _, source, clock = _stack()
    fleet.unsupported[(1, "nvmlDeviceGetCurrPcieLinkWidth")] = pynvml.NVML_ERROR_NOT_SUPPORTED
    samples = _settled(fleet, source, clock)
    assert _link(samples, "1") == ([], [], [], [])
    assert values(samples, c.GPU_FIELD_SUPPORTED.name, gpu="1", field="pcie_link") == [0]
    assert _link(samples, "0") == ([5], [5], [16], [16])
    assert values(samples, c.GPU_UP.name, gpu="1") == [1]
