"""bench/ is a folder of scripts: put it on the path so that its `quality` package imports by name
(the alert-quality tests and the dashboards test build on it); the long pole goes first."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[1] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

# The module that takes longest (its demos play faults in real time for about six minutes) is collected
# first: under `make test`'s xdist workers every other module then runs beside it, not after it.
LONG_POLES = ("tests/e2e/test_demo_stack.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in LONG_POLES)  # stable: order kept
