"""The CPU-pressure reading behind the idle_cpu tests: Linux PSI's `some avg10`, 0 where unreadable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import machine


def test_the_some_line_gives_avg10(tmp_path: Path) -> None:
    psi = tmp_path / "cpu"
    psi.write_text(
        "some avg10=37.50 avg60=12.00 avg300=3.10 total=123456\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    assert machine.cpu_pressure(psi) == 37.5


@pytest.mark.parametrize("text", ["", "some avg10=busy total=1\n", "some\n"])
def test_an_unreadable_reading_is_zero(tmp_path: Path, text: str) -> None:
    psi = tmp_path / "cpu"
    psi.write_text(text)
    assert machine.cpu_pressure(psi) == 0.0
    assert machine.cpu_pressure(tmp_path / "absent") == 0.0


def test_a_busy_machine_skips_unless_this_is_the_quiet_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "cpu_pressure", lambda: 80.0)
    monkeypatch.setattr(machine, "IDLE_CPU_RUN", False)
    with pytest.raises(pytest.skip.Exception, match=r"CPU pressure 80 %.*lag too high"):
        machine.skip_if_busy("lag too high")
    monkeypatch.setattr(machine, "IDLE_CPU_RUN", True)
    machine.skip_if_busy("lag too high")  # returns: the caller fails
    monkeypatch.setattr(machine, "IDLE_CPU_RUN", False)
    monkeypatch.setattr(machine, "cpu_pressure", lambda: 5.0)
    machine.skip_if_busy("lag too high")
