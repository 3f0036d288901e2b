"""A worker on a long pole gets no other module until the pole's last test, its classes included."""

from __future__ import annotations

import pytest

from tests.support.poles import PolesAloneScheduling

POLE = "tests/e2e/test_demo_stack.py"


def _scheduler(assigned: dict[str, dict[str, bool]]) -> PolesAloneScheduling:
    # Only the state _busy_with_a_pole reads: xdist's own constructor wants a live session.
    scheduler = PolesAloneScheduling.__new__(PolesAloneScheduling)
    scheduler.poles = (POLE,)
    scheduler.assigned_work = {"node": assigned}
    return scheduler


@pytest.mark.parametrize("scope", [POLE, f"{POLE}::TestCtrlC"])
def test_a_pole_with_tests_left_keeps_its_worker_busy(scope: str) -> None:
    pending = {f"{scope}::test_{n}": False for n in range(3)}
    assert _scheduler({scope: pending})._busy_with_a_pole("node")


def test_a_pole_at_its_last_test_and_other_modules_do_not() -> None:
    last = {f"{POLE}::test_0": True, f"{POLE}::test_1": False}
    other = {f"tests/alerts/test_x.py::test_{n}": False for n in range(3)}
    assert not _scheduler({POLE: last, "tests/alerts/test_x.py": other})._busy_with_a_pole("node")
