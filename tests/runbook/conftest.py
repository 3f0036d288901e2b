"""One simulated exporter for every runbook test that reads from it (actions, CLI): started once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.runbook.fakes import start_simulated_exporter
from tests.support import Served, stop


@pytest.fixture(scope="session")
def simulated_exporter() -> Iterator[Served]:
    """`servescope serve --simulate --gpus 4 --engines 2`; the tests only read from it."""
    served = start_simulated_exporter()
    yield served
    stop(served)
