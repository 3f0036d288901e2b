"""Hypothesis checks behaviour, not speed. The longest modules are collected first, so that `make test`'s
workers start them first. (bench/ is a package: tests import `bench.quality` by name.)"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from tests.support.order import longest_first

# Hypothesis fails an example that takes longer than its deadline (200 ms by default) and a test whose
# examples are slow to generate: claims of speed, which a busy machine breaks. Its tests check what
# each example does, not how fast; a test that sets its own `suppress_health_check` adds too_slow.
settings.register_profile("servescope", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("servescope")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = longest_first(items)
