"""The NVML source's optional fields (MIG, NVLink, XID events) and every NVML error class on one reading."""

from __future__ import annotations

import time

import pynvml
import pytest

from servescope.core import catalog as c
from servescope.exporter.sources.base import SourceError
from tests.helpers import nvml_stack, values


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


# What each NVML error does to a reading: the error is counted under its name in lower case.
OUTCOMES = {
    "field_absent": ("NOT_SUPPORTED", "NO_PERMISSION", "FUNCTION_NOT_FOUND"),
    "gpu_down": ("GPU_IS_LOST", "RESET_REQUIRED", "GPU_NOT_FOUND"),
    "source_down": ("DRIVER_NOT_LOADED", "LIB_RM_VERSION_MISMATCH", "UNINITIALIZED", "LIBRARY_NOT_FOUND"),
    "skipped_once": ("TIMEOUT", "UNKNOWN"),
}
RENAMED = {"gpu_is_lost": "gpu_lost"}
ERROR_CLASSES = [
    (getattr(pynvml, f"NVML_ERROR_{name}"), outcome, RENAMED.get(name.lower(), name.lower()))
    for outcome, names in OUTCOMES.items()
    for name in names
]


@pytest.mark.parametrize(("code", "outcome", "reason"), ERROR_CLASSES)
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
