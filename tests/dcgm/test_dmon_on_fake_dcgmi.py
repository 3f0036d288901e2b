"""The dmon source over the real fake dcgmi: streaming, hangs, host-engine errors, dropped fields, zombies."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from servescope.core import catalog as c
from servescope.core.dcgm.counters import load_counters
from servescope.exporter.dcgm.dmon_source import DmonSource
from servescope.exporter.dcgm.supervisor import spawn_process
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.sources.base import SourceError
from tests.helpers import values

FAKE_DCGMI = str(Path(sys.executable).with_name("servescope-fake-dcgmi"))
StartDmon = Callable[..., DmonSource]


def fast_wait(event: threading.Event, seconds: float) -> bool:
    return event.wait(min(seconds, 0.02))


def make_source(
    env: dict[str, str], dcgmi: str = FAKE_DCGMI, na_rows: int = 3, interval: float = 0.1
) -> DmonSource:
    full_env = {**os.environ, "SERVESCOPE_FAKE_DCGMI_GPUS": "2", **env}
    directory = GpuDirectory()
    directory.update({"0": "GPU-zero", "1": "GPU-one"})
    return DmonSource(
        load_counters(),
        dcgmi=dcgmi,
        hostname="node-a",
        directory=directory,
        interval_seconds=interval,
        na_rows=na_rows,
        spawn=lambda argv: spawn_process(argv, env=full_env),
        wait=fast_wait,
    )


@pytest.fixture
def dmon() -> Iterator[StartDmon]:
    """make_source, each source closed after the test."""
    made: list[DmonSource] = []

    def start(env: dict[str, str], **kwargs: Any) -> DmonSource:
        made.append(make_source(env, **kwargs))
        return made[-1]

    yield start
    for source in made:
        source.close()


def until(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


@pytest.mark.e2e
def test_streams_and_exports_with_nvml_labels(dmon: StartDmon) -> None:
    source = dmon({})
    samples = source.collect().samples
    until(lambda: bool(values(source.collect().samples, "servescope_dcgm_sm_active_ratio", gpu="1")))
    samples = source.collect().samples
    assert values(
        samples, "servescope_dcgm_nvlink_crc_flit_errors_total", gpu="0", uuid="GPU-zero", hostname="node-a"
    ) == [0]
    (pcie,) = values(samples, "servescope_dcgm_pcie_tx_bytes_per_second", gpu="1", uuid="GPU-one")
    assert pcie > 0
    assert not values(samples, "servescope_dcgm_nvlink5_rx_errors_total")  # 409 works: no fallback


@pytest.mark.e2e
def test_hung_child_is_killed_within_three_delays_and_restarted(dmon: StartDmon) -> None:
    source = dmon({"SERVESCOPE_FAKE_DCGMI_HANG_AFTER": "3"})
    _collect(source)
    until(lambda: source.supervisor.status.restarts >= 1)
    assert source.supervisor.status.last_failure is not None
    assert source.supervisor.status.last_failure[0] == "hung"
    until(lambda: bool(values(_collect(source), c.DCGM_RESTARTS.name, reason="hung")))
    # a hung child is declared 3 x 0.1 s after its last row (plus polling), not later
    assert source.supervisor.hang_after == pytest.approx(0.3)


@pytest.mark.e2e
def test_host_engine_unreachable_is_source_down_with_reason(dmon: StartDmon) -> None:
    source = dmon({"SERVESCOPE_FAKE_DCGMI_MODE": "unreachable"})
    with pytest.raises(SourceError):
        source.collect()
    until(lambda: source.supervisor.status.down_reason == "host_engine_unreachable")
    with pytest.raises(SourceError) as failure:
        source.collect()
    assert failure.value.reason == "host_engine_unreachable" and not failure.value.absent


@pytest.mark.e2e
def test_missing_binary_is_not_installed_and_absent(dmon: StartDmon) -> None:
    source = dmon({}, dcgmi="/nonexistent/dcgmi")
    _collect(source)
    until(lambda: source.supervisor.status.down_reason == "not_installed")
    with pytest.raises(SourceError) as failure:
        source.collect()
    assert failure.value.reason == "not_installed" and failure.value.absent


@pytest.mark.e2e
def test_field_unknown_to_this_dcgm_is_dropped_and_the_rest_streams(dmon: StartDmon) -> None:
    source = dmon({"SERVESCOPE_FAKE_DCGMI_INVALID": "497"})
    until(lambda: bool(values(_collect(source), "servescope_dcgm_nvlink_crc_flit_errors_total", gpu="0")))
    samples = _collect(source)
    assert 497 not in source.watch_list()
    assert values(samples, c.DCGM_FIELD_SUPPORTED.name, gpu="0", field_id="497") == [0]
    assert not values(samples, "servescope_dcgm_nvlink_dl_crc_errors_total")


@pytest.mark.e2e
def test_profiling_refused_by_the_host_is_dropped_not_fatal(dmon: StartDmon) -> None:
    source = dmon({"SERVESCOPE_FAKE_DCGMI_MODE": "watch_error"})
    until(
        lambda: bool(
            values(_collect(source), "servescope_dcgm_pcie_tx_bytes_per_second", gpu="1")
            or values(_collect(source), "servescope_dcgm_nvlink_crc_flit_errors_total", gpu="1")
        )
    )
    assert not [fid for fid in source.watch_list() if 1001 <= fid <= 1012]
    samples = _collect(source)
    assert values(samples, c.DCGM_FIELD_SUPPORTED.name, gpu="1", field_id="1002") == [0]


@pytest.mark.e2e
def test_field_na_for_n_rows_is_unsupported_and_its_fallback_is_watched(
    dmon: StartDmon,
) -> None:
    source = dmon({"SERVESCOPE_FAKE_DCGMI_NA": "409"})
    until(lambda: bool(values(_collect(source), "servescope_dcgm_nvlink5_rx_errors_total", gpu="0")))
    samples = _collect(source)
    assert 1206 in source.watch_list()
    assert not values(samples, "servescope_dcgm_nvlink_crc_flit_errors_total")  # never exported as 0
    assert values(samples, c.DCGM_FIELD_SUPPORTED.name, gpu="0", field_id="409") == [0]


def _collect(source: DmonSource) -> list:  # type: ignore[type-arg]
    try:
        return source.collect().samples
    except SourceError:
        return []


def children_of(pid: int, state: str | None = None) -> list[int]:
    """PIDs whose parent is `pid` (optionally only those in `state`, e.g. Z for zombies)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and (state is None or fields[0] == state):
            found.append(int(stat.parent.name))
    return found


def zombies_of(pid: int) -> list[int]:
    return children_of(pid, "Z")


@pytest.mark.e2e
def test_no_zombies_after_twenty_restarts(dmon: StartDmon) -> None:
    source = dmon({"SERVESCOPE_FAKE_DCGMI_EXIT_AFTER": "1"})
    _collect(source)
    until(lambda: source.supervisor.status.restarts >= 20, timeout=60)
    assert zombies_of(os.getpid()) == []
    source.close()
    leftover = [
        pid for pid in children_of(os.getpid()) if b"fake-dcgmi" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert leftover == []  # shutdown killed and reaped the child
