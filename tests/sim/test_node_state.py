"""The fake `dcgmi` watches the node the simulated NVML shows: what scenarios drive reaches both."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from servescope_sim.fleet import SimulatedFleet
from servescope_sim.node_state import STATE_ENV, StateWriter, apply, write
from servescope_sim.wiring import fake_dcgmi_path


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def driven_fleet() -> SimulatedFleet:
    clock = Clock()
    fleet = SimulatedFleet(4, seed=3, clock=clock)
    fleet.set_load(0, 0.95)
    fleet.nvlink_crc_burst(1, 0, 5.0)
    clock.now = 60.0
    fleet.advance()
    return fleet


def test_the_written_state_carries_load_and_nvlink_errors_to_another_fleet(tmp_path: Path) -> None:
    driven, other = driven_fleet(), SimulatedFleet(4, seed=3, clock=Clock())
    write(driven, tmp_path / "state.json")
    assert apply(other, tmp_path / "state.json")
    for mine, theirs in zip(driven.gpus, other.gpus, strict=True):
        assert theirs.utilization == mine.utilization
        assert theirs.memory_activity == mine.memory_activity
        assert theirs.nvlink_errors == mine.nvlink_errors
    assert other.gpus[0].utilization > 0.85
    assert other.gpus[1].nvlink_errors[(0, 2)] > 250  # 5 errors/s for a minute


def test_no_state_or_a_broken_one_leaves_the_fleet_on_its_own(tmp_path: Path) -> None:
    fleet = SimulatedFleet(2, seed=3, clock=Clock())
    before = [(g.utilization, dict(g.nvlink_errors)) for g in fleet.gpus]
    assert not apply(fleet, tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text('{"0": {"utilization": "x"')
    assert not apply(fleet, tmp_path / "broken.json")
    assert [(g.utilization, dict(g.nvlink_errors)) for g in fleet.gpus] == before


def test_the_writer_removes_its_file_at_stop(tmp_path: Path) -> None:
    writer = StateWriter(driven_fleet(), tmp_path / "state.json")
    writer.start()
    assert (tmp_path / "state.json").exists()
    writer.stop()
    assert not (tmp_path / "state.json").exists()


def sm_activity_rows(env: dict[str, str]) -> list[list[str]]:
    argv = [fake_dcgmi_path(), "dmon", "-e", "1002", "-c", "2", "-d", "10"]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30, check=True).stdout
    return [line.split() for line in out.splitlines() if line.startswith("GPU")]


def test_the_fake_dcgmi_reports_the_sm_activity_of_the_driven_load(tmp_path: Path) -> None:
    write(driven_fleet(), tmp_path / "state.json")
    env = {**os.environ, "SERVESCOPE_FAKE_DCGMI_GPUS": "4", "SERVESCOPE_FAKE_DCGMI_SEED": "3"}
    rows = sm_activity_rows({**env, STATE_ENV: str(tmp_path / "state.json")})
    # The second pass (the first has no profiling values): GPU 0 at 0.95 load gives 0.9 x load.
    second = {row[1]: float(row[2]) for row in rows[4:]}
    assert second["0"] > 0.8
    undriven = {row[1]: float(row[2]) for row in sm_activity_rows(env)[4:]}
    assert undriven["0"] < second["0"]
