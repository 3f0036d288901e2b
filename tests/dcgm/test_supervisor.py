"""The dmon supervisor: backoff on a fake clock, and the real fake dcgmi for hangs, errors and zombies."""

from __future__ import annotations

import io
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from servescope import catalog as c
from servescope.exporter.dcgm.counters import load_counters
from servescope.exporter.dcgm.dmon_source import DmonSource
from servescope.exporter.dcgm.supervisor import Backoff, Child, DmonSupervisor, spawn_process
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.sources.base import SourceError
from tests.helpers import FakeClock, values

FAKE_DCGMI = str(Path(sys.executable).with_name("servescope-fake-dcgmi"))


class FakeChild:
    """A child process that exits when the fake clock reaches `exit_at` (None: never by itself)."""

    pid = 10**8  # not a real process: kill_child falls back to kill()

    def __init__(self, clock: FakeClock, output: str, exit_at: float | None) -> None:
        self.stdout = io.StringIO(output)
        self.stderr = io.StringIO("")
        self._clock = clock
        self._exit_at = exit_at
        self.killed = False

    def poll(self) -> int | None:
        if self.killed:
            return -9
        if self._exit_at is not None and self._clock() >= self._exit_at:
            return 1
        return None

    def wait(self, timeout: float | None = None) -> int:
        return self.poll() or 0

    def kill(self) -> None:
        self.killed = True


def fake_wait(clock: FakeClock, log: list[float]) -> Callable[[threading.Event, float], bool]:
    def wait(event: threading.Event, seconds: float) -> bool:
        if seconds > 0.5:
            log.append(seconds)
        clock.advance(seconds)
        time.sleep(0.0005)  # let reader threads run
        return event.is_set()

    return wait


def faked_supervisor(
    spawn: Callable[[Sequence[str]], Child],
    clock: FakeClock,
    waited: list[float],
    *,
    delay: float,
    argv: Callable[[], list[str]] = lambda: ["dcgmi"],
    on_event: Callable[[Any], None] = lambda event: None,
) -> DmonSupervisor:
    """A supervisor on the fake clock: children from `spawn`, its waits logged in `waited`."""
    return DmonSupervisor(
        argv, on_event, delay_seconds=delay, spawn=spawn, clock=clock, wait=fake_wait(clock, waited)
    )


def test_exits_back_off_exponentially_to_a_minute() -> None:
    clock, waited = FakeClock(), []
    spawned: list[float] = []
    supervisor: DmonSupervisor

    def spawn(argv: Sequence[str]) -> Child:
        spawned.append(clock())
        if len(spawned) == 9:
            supervisor._stop.set()
        return FakeChild(clock, "", exit_at=clock())

    supervisor = faked_supervisor(spawn, clock, waited, delay=1.0, argv=lambda: ["dcgmi", "dmon"])
    supervisor._run()
    assert supervisor.delays == [1, 2, 4, 8, 16, 32, 60, 60]
    gaps = [b - a for a, b in itertools.pairwise(spawned)]
    assert gaps == pytest.approx([1, 2, 4, 8, 16, 32, 60, 60], abs=0.2)


def test_a_healthy_minute_resets_the_backoff() -> None:
    clock, waited = FakeClock(), []
    row = "#Entity  POWER\nID\nGPU 0  100\n"
    runs = [None, None, 61.0, None]  # third child streams for 61 s before it exits
    supervisor: DmonSupervisor

    def spawn(argv: Sequence[str]) -> Child:
        lasts = runs.pop(0)
        if not runs:
            supervisor._stop.set()
        return FakeChild(clock, row if lasts else "", exit_at=clock() + (lasts or 0))

    supervisor = faked_supervisor(spawn, clock, waited, delay=30.0)
    supervisor._run()
    assert supervisor.delays == [1, 2, 1]


def test_backoff_policy() -> None:
    policy = Backoff()
    assert [policy.after_exit(1, produced_rows=True) for _ in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert policy.after_exit(59, produced_rows=True) == 60
    assert policy.after_exit(61, produced_rows=False) == 60  # a minute of silence is not healthy
    assert policy.after_exit(61, produced_rows=True) == 1


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
def sources() -> Iterator[list[DmonSource]]:
    made: list[DmonSource] = []
    yield made
    for source in made:
        source.close()


def until(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


@pytest.mark.e2e
def test_streams_and_exports_with_nvml_labels(sources: list[DmonSource]) -> None:
    source = make_source({})
    sources.append(source)
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
def test_hung_child_is_killed_within_three_delays_and_restarted(sources: list[DmonSource]) -> None:
    source = make_source({"SERVESCOPE_FAKE_DCGMI_HANG_AFTER": "3"})
    sources.append(source)
    _collect(source)
    until(lambda: source.supervisor.status.restarts >= 1)
    assert source.supervisor.status.last_failure is not None
    assert source.supervisor.status.last_failure[0] == "hung"
    until(lambda: bool(values(_collect(source), c.DCGM_RESTARTS.name, reason="hung")))
    # a hung child is declared 3 x 0.1 s after its last row (plus polling), not later
    assert source.supervisor.hang_after == pytest.approx(0.3)


@pytest.mark.e2e
def test_host_engine_unreachable_is_source_down_with_reason(sources: list[DmonSource]) -> None:
    source = make_source({"SERVESCOPE_FAKE_DCGMI_MODE": "unreachable"})
    sources.append(source)
    with pytest.raises(SourceError):
        source.collect()
    until(lambda: source.supervisor.status.down_reason == "host_engine_unreachable")
    with pytest.raises(SourceError) as failure:
        source.collect()
    assert failure.value.reason == "host_engine_unreachable" and not failure.value.absent


@pytest.mark.e2e
def test_missing_binary_is_not_installed_and_absent(sources: list[DmonSource]) -> None:
    source = make_source({}, dcgmi="/nonexistent/dcgmi")
    sources.append(source)
    _collect(source)
    until(lambda: source.supervisor.status.down_reason == "not_installed")
    with pytest.raises(SourceError) as failure:
        source.collect()
    assert failure.value.reason == "not_installed" and failure.value.absent


@pytest.mark.e2e
def test_field_unknown_to_this_dcgm_is_dropped_and_the_rest_streams(sources: list[DmonSource]) -> None:
    source = make_source({"SERVESCOPE_FAKE_DCGMI_INVALID": "497"})
    sources.append(source)
    until(lambda: bool(values(_collect(source), "servescope_dcgm_nvlink_crc_flit_errors_total", gpu="0")))
    samples = _collect(source)
    assert 497 not in source.watch_list()
    assert values(samples, c.DCGM_FIELD_SUPPORTED.name, gpu="0", field_id="497") == [0]
    assert not values(samples, "servescope_dcgm_nvlink_dl_crc_errors_total")


@pytest.mark.e2e
def test_profiling_refused_by_the_host_is_dropped_not_fatal(sources: list[DmonSource]) -> None:
    source = make_source({"SERVESCOPE_FAKE_DCGMI_MODE": "watch_error"})
    sources.append(source)
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
def test_field_na_for_n_rows_is_unsupported_and_its_fallback_is_watched(sources: list[DmonSource]) -> None:
    source = make_source({"SERVESCOPE_FAKE_DCGMI_NA": "409"})
    sources.append(source)
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
def test_no_zombies_after_twenty_restarts(sources: list[DmonSource]) -> None:
    source = make_source({"SERVESCOPE_FAKE_DCGMI_EXIT_AFTER": "1"})
    sources.append(source)
    _collect(source)
    until(lambda: source.supervisor.status.restarts >= 20, timeout=60)
    assert zombies_of(os.getpid()) == []
    source.close()
    leftover = [
        pid for pid in children_of(os.getpid()) if b"fake-dcgmi" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert leftover == []  # shutdown killed and reaped the child


def test_a_child_silent_for_three_delays_is_killed_on_the_fake_clock() -> None:
    clock, waited = FakeClock(), []
    children: list[FakeChild] = []
    row_seen_at: list[float] = []
    supervisor: DmonSupervisor

    def spawn(argv: Sequence[str]) -> Child:
        if children:
            supervisor._stop.set()
        children.append(FakeChild(clock, "#Entity  POWER\nID\nGPU 0  100\n", exit_at=None))
        return children[-1]

    def on_event(event: object) -> None:
        if type(event).__name__ == "Row":
            row_seen_at.append(clock())

    supervisor = faked_supervisor(spawn, clock, waited, delay=1.0, on_event=on_event)
    supervisor._run()
    assert children[0].killed
    assert supervisor.status.last_failure is not None and supervisor.status.last_failure[0] == "hung"
    assert waited == [1.0]  # the kill was followed by the first backoff step
    silent_for = _kill_time(waited, clock) - row_seen_at[0]
    assert 3.0 < silent_for <= 3.2


def _kill_time(waited: list[float], clock: FakeClock) -> float:
    # The clock now stands at: kill time + the backoff wait that followed it.
    return clock() - sum(waited)
