"""What servescope does when the simulator's distribution is not installed: its entry-point lookup finds
nothing (the same state as tests/test_packaging.py's interpreter with only the production wheel)."""

from __future__ import annotations

import pytest

from servescope.core import extensions
from servescope.core.extensions import MissingDistributionError, simulator
from servescope.kit.load.calibrate import calibrated


@pytest.fixture
def no_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extensions, "entry_point", lambda group, name: None)


def test_with_servescope_sim_installed_its_hooks_load() -> None:
    assert callable(simulator("runtime", "`servescope serve --simulate`"))
    assert callable(simulator("instant-server", "calibration"))


@pytest.mark.usefixtures("no_simulator")
def test_a_hook_without_the_distribution_names_it_and_how_to_install_it() -> None:
    with pytest.raises(MissingDistributionError) as raised:
        simulator("engine", "`servescope capacity run --simulate`")
    assert raised.value.reason == "missing_distribution"
    assert str(raised.value) == (
        "`servescope capacity run --simulate` needs the servescope-sim distribution, which is not "
        "installed: pip install servescope-sim (from a clone of the repository: pip install -e ./sim)"
    )


@pytest.mark.usefixtures("no_simulator")
def test_a_run_that_calibrates_says_the_ceiling_was_not_measured_and_goes_on() -> None:
    said: list[str] = []
    assert calibrated(None, "completions", said.append) is None
    assert len(said) == 1
    assert said[0].startswith("client ceiling not measured: measuring the client's ceiling needs the ")
    assert said[0].endswith("steps are judged by their schedule lag alone")
