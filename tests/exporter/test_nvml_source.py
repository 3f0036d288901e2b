"""The NVML source against the simulator's pynvml-shaped module, error class by error class."""

from __future__ import annotations

import logging
import time

import pynvml
import pytest

from servescope import catalog as c
from servescope.catalog.pcie import PCIE_LINK
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


def test_mig_enabled_gpu_does_not_crash_and_omits_whole_gpu_utilization() -> None:
    fleet, source, _ = nvml_stack(gpus=3)
    fleet.set_mig(1)
    samples = source.collect().samples
    assert [s.label_values[-1] for s in samples if s.spec is c.GPU_INFO] == [
        "disabled",
        "enabled",
        "disabled",
    ]
    assert not values(samples, c.UTILIZATION.name, gpu="1")
    assert values(samples, c.UTILIZATION.name, gpu="2")
    assert values(samples, c.GPU_FIELD_SUPPORTED.name, gpu="1", field="utilization") == [0]
    assert values(samples, c.MEMORY_USED.name, gpu="1")


def test_nvlink_down_link_and_crc_burst_summed_per_gpu() -> None:
    fleet, source, clock = nvml_stack(gpus=1)
    fleet.nvlink_crc_burst(0, 3, errors_per_second=10)
    fleet.nvlink_crc_burst(0, 5, errors_per_second=1)
    source.collect()
    clock.advance(60)
    (before,) = values(source.collect().samples, c.NVLINK_ERRORS.name, type="crc_flit")
    assert 650 <= before <= 670
    fleet.set_link_down(0, 5)
    clock.advance(60)
    samples = source.collect().samples
    assert values(samples, c.NVLINK_LINKS.name) == [18] and values(samples, c.NVLINK_LINKS_UP.name) == [17]
    (flit,) = values(samples, c.NVLINK_ERRORS.name, type="crc_flit")
    # Link 5 is no longer read: its last count stays in the sum, which never goes backwards.
    assert flit >= before + 590
    assert not values(samples, c.NVLINK_UP.name)


def test_nvlink_per_link_series_as_an_option() -> None:
    fleet, source, clock = nvml_stack(gpus=1, nvlink_per_link=True)
    fleet.set_link_down(0, 5)
    fleet.nvlink_crc_burst(0, 3, errors_per_second=10)
    source.collect()
    clock.advance(60)
    samples = source.collect().samples
    assert values(samples, c.NVLINK_UP.name, link="5") == [0]
    assert not values(samples, c.NVLINK_LINK_ERRORS.name, link="5")
    (flit,) = values(samples, c.NVLINK_LINK_ERRORS.name, link="3", type="crc_flit")
    assert 590 <= flit <= 610
    assert values(samples, c.NVLINK_LINK_ERRORS.name, link="2", type="crc_flit") == [0]
    assert values(samples, c.NVLINK_ERRORS.name, type="crc_flit") == [flit]  # the per-GPU sum is kept


def test_gpu_without_nvlink_reports_the_field_unsupported() -> None:
    _, source, _ = nvml_stack(gpus=1, model="L40S")
    samples = source.collect().samples
    assert not values(samples, c.NVLINK_LINKS.name) and not values(samples, c.NVLINK_ERRORS.name)
    assert values(samples, c.GPU_FIELD_SUPPORTED.name, field="nvlink") == [0]


def test_xid_events_are_counted_per_uuid_and_xid_with_last_seen() -> None:
    fleet, source, clock = nvml_stack(gpus=2, xid_events=True)
    try:
        source.collect()
        fleet.emit_xid(1, 79)
        fleet.emit_xid(1, 79)
        fleet.emit_xid(0, 48)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            samples = source.collect().samples
            if values(samples, c.XID_ERRORS.name, gpu="1", xid="79") == [2]:
                break
            time.sleep(0.02)
        assert values(samples, c.XID_ERRORS.name, gpu="1", xid="79", uuid=fleet.gpus[1].uuid) == [2]
        assert values(samples, c.XID_ERRORS.name, gpu="0", xid="48") == [1]
        assert values(samples, c.XID_LAST_SEEN.name, gpu="1", xid="79") == [1.7e9 + clock.now]
    finally:
        source.close()


def test_node_without_xid_event_support_reports_it_once_instead_of_erroring_every_cycle() -> None:
    fleet, source, _ = nvml_stack(gpus=2, xid_events=True)
    fleet.unsupported[(None, "nvmlEventSetCreate")] = pynvml.NVML_ERROR_NOT_SUPPORTED
    try:
        for _ in range(3):
            collection = source.collect()
            assert collection.problems == []
        assert values(collection.samples, c.GPU_FIELD_SUPPORTED.name, field="xid_events") == [0, 0]
        assert values(collection.samples, c.GPU_UP.name) == [1, 1]
    finally:
        source.close()


@pytest.mark.parametrize(
    ("code", "outcome", "reason"),
    [
        (pynvml.NVML_ERROR_NOT_SUPPORTED, "field_absent", "not_supported"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "field_absent", "no_permission"),
        (pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, "field_absent", "function_not_found"),
        (pynvml.NVML_ERROR_GPU_IS_LOST, "gpu_down", "gpu_lost"),
        (pynvml.NVML_ERROR_RESET_REQUIRED, "gpu_down", "reset_required"),
        (pynvml.NVML_ERROR_GPU_NOT_FOUND, "gpu_down", "gpu_not_found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "source_down", "driver_not_loaded"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "source_down", "lib_rm_version_mismatch"),
        (pynvml.NVML_ERROR_UNINITIALIZED, "source_down", "uninitialized"),
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "source_down", "library_not_found"),
        (pynvml.NVML_ERROR_TIMEOUT, "skipped_once", "timeout"),
        (pynvml.NVML_ERROR_UNKNOWN, "skipped_once", "unknown"),
    ],
)
def test_every_error_class_on_one_reading_of_one_gpu(code: int, outcome: str, reason: str) -> None:
    fleet, source, _ = nvml_stack(gpus=2)
    source.collect()
    fleet.unsupported[(1, "nvmlDeviceGetTemperature")] = code
    if outcome == "source_down":
        with pytest.raises(SourceError) as failure:
            source.collect()
        assert failure.value.reason == reason
        return
    collection = source.collect()
    samples = collection.samples
    assert not values(samples, c.TEMPERATURE.name, gpu="1")
    assert values(samples, c.TEMPERATURE.name, gpu="0")
    problems = [p.reason for p in collection.problems]
    if outcome == "field_absent":
        assert problems == []
        assert values(samples, c.GPU_UP.name, gpu="1") == [1]
        assert values(samples, c.GPU_FIELD_SUPPORTED.name, gpu="1", field="temperature") == [0]
        assert values(samples, c.POWER.name, gpu="1")
    elif outcome == "gpu_down":
        assert problems == [reason]
        assert values(samples, c.GPU_UP.name, gpu="1") == [0]
        assert values(samples, c.GPU_UP.name, gpu="0") == [1]
        assert not values(samples, c.POWER.name, gpu="1")
    else:
        assert problems == [reason]
        assert values(samples, c.GPU_UP.name, gpu="1") == [1]
        assert not values(samples, c.GPU_FIELD_SUPPORTED.name, gpu="1", field="temperature")  # supported
