"""bench/ is a folder of scripts: put it on the path so that its `quality` package imports by name
(the alert-quality tests and the dashboards test build on it); the long pole goes first."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[1] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

# The modules that take longest are collected first, longest first: the demo stacks (about five and a
# half minutes of demo time), then `make demo` from a fresh clone (about three). Under `make test`'s
# xdist workers every other module then runs beside them, not after them (tests/support/poles.py).
LONG_POLES = ("tests/e2e/test_demo_stack.py", "tests/docs/test_readme_demo.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def pole(item: pytest.Item) -> int:
        module = item.nodeid.split("::")[0]
        return LONG_POLES.index(module) if module in LONG_POLES else len(LONG_POLES)

    items.sort(key=pole)  # stable: the order within each module and among the others is kept


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Under `--dist loadscope` (make test), each long pole runs alone on its worker."""
    if config.getoption("dist", None) != "loadscope":
        return None
    from tests.support.poles import PolesAloneScheduling

    scheduler = PolesAloneScheduling(config, log)
    scheduler.poles = LONG_POLES
    return scheduler
