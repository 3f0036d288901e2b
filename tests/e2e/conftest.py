"""Fixtures of the end-to-end tests: one simulated exporter for the session, and promtool."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.support import Served, servescope_serving


@pytest.fixture(scope="session")
def simulated() -> Iterator[Served]:
    with servescope_serving("--simulate", "--seed", "1", "--hostname", "golden-node") as served:
        yield served


@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed: `make test` installs Debian's prometheus package")
    return path
