"""The NVML source against the simulator's pynvml-shaped module: every family, memory, lost GPUs, a
missing library, a failing driver."""

from __future__ import annotations

import logging

import pynvml
import pytest

from servescope.core import catalog as c
from servescope.core.catalog.pcie import PCIE_LINK
from servescope.exporter.publisher import Publisher
from servescope.exporter.runner import SourceRunner
from servescope.exporter.sources.base import SourceError
from tests.helpers import families_for_gpu, nvml_stack, values

PER_GPU_FAMILIES = {
    c.GPU_INFO.name,
    c.GPU_UP.name,
    c.GPU_FIELD_SUPPORTED.name,
    c.MEMORY_USED.name,
    c.MEMORY_FREE.name,
    c.MEMORY_RESERVED.name,
    c.MEMORY_TOTAL.name,
    c.UTILIZATION.name,
    c.MEMORY_UTILIZATION.name,
    c.TEMPERATURE.name,
    c.POWER.name,
    c.POWER_LIMIT.name,
    c.ENERGY.name,
    c.CLOCK.name,
    c.CLOCK_EVENT.name,
    c.PCIE_REPLAY.name,
    *(spec.name for spec in PCIE_LINK),
    c.ECC_ERRORS.name,
    c.REMAPPED_ROWS.name,
    c.REMAPPED_ROWS_PENDING.name,
    c.REMAPPED_ROWS_FAILED.name,
    c.NVLINK_LINKS.name,
    c.NVLINK_LINKS_UP.name,
    c.NVLINK_ERRORS.name,
    c.PROCESSES.name,
    c.PROCESS_MEMORY.name,
}


def exposition_text(runner: SourceRunner, publisher: Publisher) -> str:
    runner.run_once()
    return publisher.current.body.decode()


def test_healthy_fleet_exports_every_family_with_gpu_uuid_hostname() -> None:
    fleet, source, _ = nvml_stack(gpus=2)
    samples = source.collect().samples
    for gpu in fleet.gpus:
        assert families_for_gpu(samples, str(gpu.index)) == PER_GPU_FAMILIES
        assert values(samples, c.MEMORY_TOTAL.name, gpu=str(gpu.index), uuid=gpu.uuid, hostname="node-a") == [
            gpu.model.memory_bytes
        ]
    (util,) = values(samples, c.UTILIZATION.name, gpu="0")
    assert 0.0 <= util <= 1.0
    assert values(samples, c.CLOCK.name, gpu="0", clock="memory") == [3201e6]
    assert values(samples, c.POWER_LIMIT.name, gpu="1") == [700.0]
    assert (
        values(samples, c.NVLINK_LINKS.name, gpu="0")
        == values(samples, c.NVLINK_LINKS_UP.name, gpu="0")
        == [18]
    )
    assert len(values(samples, c.NVLINK_ERRORS.name, gpu="0")) == 4  # one per type, summed over the links
    assert not values(samples, c.NVLINK_UP.name) and not values(samples, c.NVLINK_LINK_ERRORS.name)
    assert values(samples, c.PROCESS_MEMORY.name, gpu="1", pid=str(fleet.gpus[1].worker_pid))
    # Ampere and later GPUs answer NotSupported for page retirement: absent, and said so.
    assert values(samples, c.GPU_FIELD_SUPPORTED.name, gpu="0", field="retired_pages") == [0]
    assert not values(samples, c.RETIRED_PAGES.name)
    (info,) = [s for s in samples if s.spec is c.GPU_INFO and s.label_values[0] == "0"]
    assert dict(zip(c.GPU_INFO.labels, info.label_values, strict=True)) == {
        "gpu": "0",
        "uuid": fleet.gpus[0].uuid,
        "hostname": "node-a",
        "gpu_model": "NVIDIA H200",
        "pci_bus_id": "00000000:18:00.0",
        "driver_version": "570.133.20",
        "mig_mode": "disabled",
    }


def test_memory_v2_reports_reserved_and_used_separately() -> None:
    fleet, source, _ = nvml_stack(gpus=1)
    samples = source.collect().samples
    gpu = fleet.gpus[0]
    (used,) = values(samples, c.MEMORY_USED.name)
    (reserved,) = values(samples, c.MEMORY_RESERVED.name)
    (free,) = values(samples, c.MEMORY_FREE.name)
    assert reserved == gpu.model.reserved_bytes
    assert used + reserved + free == gpu.model.memory_bytes


def test_old_driver_without_memory_v2_falls_back_to_v1() -> None:
    fleet, source, _ = nvml_stack(gpus=1)
    fleet.unsupported[(None, "nvmlDeviceGetMemoryInfo_v2")] = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    samples = source.collect().samples
    assert values(samples, c.MEMORY_TOTAL.name) == [fleet.gpus[0].model.memory_bytes]
    assert values(samples, c.MEMORY_USED.name)
    assert not values(samples, c.MEMORY_RESERVED.name)


def test_gpu_lost_mid_run_marks_only_that_gpu_down_then_recovers() -> None:
    fleet, source, clock = nvml_stack(gpus=4)
    publisher = Publisher()
    runner = SourceRunner(source, publisher, monotonic=clock)
    runner.run_once()
    fleet.lose_gpu(2)
    text = exposition_text(runner, publisher)
    uuid2 = fleet.gpus[2].uuid
    assert f'servescope_gpu_up{{gpu="2",uuid="{uuid2}",hostname="node-a"}} 0' in text
    assert 'servescope_gpu_memory_used_bytes{gpu="2",' not in text
    assert 'servescope_gpu_memory_used_bytes{gpu="3",' in text
    assert 'servescope_source_up{source="nvml"} 1' in text
    assert 'servescope_source_errors_total{source="nvml",reason="gpu_lost"} 1' in text

    # Re-enumeration happens after the back-off; the lost GPU stays visible as down, not dropped.
    clock.advance(31)
    text = exposition_text(runner, publisher)
    assert f'servescope_gpu_up{{gpu="2",uuid="{uuid2}",hostname="node-a"}} 0' in text
    assert 'servescope_gpu_up{gpu="1",' in text and 'servescope_gpu_temperature_celsius{gpu="1",' in text

    fleet.lose_gpu(2, lost=False)  # e.g. after a GPU reset
    clock.advance(31)
    runner.run_once()
    text = exposition_text(runner, publisher)
    assert f'servescope_gpu_up{{gpu="2",uuid="{uuid2}",hostname="node-a"}} 1' in text
    assert 'servescope_gpu_memory_used_bytes{gpu="2",' in text


def test_not_supported_field_drops_only_that_field_and_is_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fleet, source, _ = nvml_stack(gpus=2)
    fleet.unsupported[(1, "nvmlDeviceGetPowerUsage")] = pynvml.NVML_ERROR_NOT_SUPPORTED
    fleet.unsupported[(1, "nvmlDeviceGetComputeRunningProcesses")] = pynvml.NVML_ERROR_NO_PERMISSION
    with caplog.at_level(logging.INFO, logger="servescope.exporter.nvml"):
        for _ in range(3):
            collection = source.collect()
    samples = collection.samples
    assert not values(samples, c.POWER.name, gpu="1")
    assert values(samples, c.POWER.name, gpu="0")
    assert values(samples, c.TEMPERATURE.name, gpu="1")
    assert values(samples, c.GPU_FIELD_SUPPORTED.name, gpu="1", field="power") == [0]
    assert not values(samples, c.GPU_FIELD_SUPPORTED.name, gpu="0", field="power")  # supported: not listed
    assert values(samples, c.GPU_FIELD_SUPPORTED.name, gpu="1", field="processes") == [0]
    assert not values(samples, c.PROCESSES.name, gpu="1")
    assert values(samples, c.GPU_UP.name, gpu="1") == [1]
    assert collection.problems == []  # a missing field is a fact about the GPU, not an error
    power_logs = [r for r in caplog.records if "field power unavailable" in r.getMessage()]
    assert len(power_logs) == 1


def test_transient_timeout_counts_a_problem_and_retries_next_cycle() -> None:
    fleet, source, _ = nvml_stack(gpus=1)
    fleet.unsupported[(0, "nvmlDeviceGetTemperature")] = pynvml.NVML_ERROR_TIMEOUT
    collection = source.collect()
    assert [p.reason for p in collection.problems] == ["timeout"]
    assert not values(collection.samples, c.TEMPERATURE.name)
    del fleet.unsupported[(0, "nvmlDeviceGetTemperature")]
    collection = source.collect()
    assert values(collection.samples, c.TEMPERATURE.name)
    assert not values(collection.samples, c.GPU_FIELD_SUPPORTED.name, field="temperature")  # supported


def test_library_not_found_at_start_is_source_down_then_recovers() -> None:
    fleet, source, clock = nvml_stack(gpus=2)
    fleet.init_error = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    publisher = Publisher()
    runner = SourceRunner(source, publisher, monotonic=clock)
    text = exposition_text(runner, publisher)
    assert 'servescope_source_up{source="nvml"} 0' in text
    assert 'servescope_source_errors_total{source="nvml",reason="library_not_found"} 1' in text
    assert "servescope_gpu_" not in text
    assert runner.health.last_error is not None and "--simulate" in runner.health.last_error
    ready, why = runner.health.readiness(clock())
    assert not ready and "library_not_found" in why

    fleet.init_error = None  # the driver got installed
    text = exposition_text(runner, publisher)
    assert 'servescope_source_up{source="nvml"} 1' in text
    assert 'servescope_gpu_up{gpu="1",' in text


def test_driver_failure_mid_run_drops_gpu_series_instead_of_freezing_them() -> None:
    fleet, source, clock = nvml_stack(gpus=2)
    publisher = Publisher()
    runner = SourceRunner(source, publisher, monotonic=clock)
    assert "servescope_gpu_power_watts" in exposition_text(runner, publisher)
    fleet.unsupported[(None, "nvmlDeviceGetMemoryInfo_v2")] = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    text = exposition_text(runner, publisher)
    assert 'servescope_source_up{source="nvml"} 0' in text
    assert "servescope_gpu_power_watts" not in text
    assert 'reason="driver_not_loaded"} 1' in text
    del fleet.unsupported[(None, "nvmlDeviceGetMemoryInfo_v2")]
    text = exposition_text(runner, publisher)
    assert 'servescope_source_up{source="nvml"} 1' in text and "servescope_gpu_power_watts" in text


def test_zero_gpus_is_a_failure() -> None:
    _, source, _ = nvml_stack(gpus=0)
    with pytest.raises(SourceError) as failure:
        source.collect()
    assert failure.value.reason == "no_gpus"
