"""The order `make test` hands modules to its workers: longest first, so that the long ones start at
once and the short ones fill the end (xdist's loadscope gives out whole modules in collection order)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

# The modules that take longest, longest first, each on a worker of its own from the start: the live
# cluster's pages (about six minutes of real time), the demo stacks (five and a half of demo time), the
# weekly capacity job's two searches (four), `make demo` from a fresh clone (three); they mostly wait, so
# the workers left over take the CPU's work meanwhile, the fleet's alert-quality runs first (the most CPU
# of any module). Then every module holding a test marked slow, then e2e, then the rest.
LONG_POLES = (
    "tests/alerts/test_live_pages.py",
    "tests/e2e/test_demo_stack.py",
    "tests/capacity/test_weekly.py",
    "tests/docs/test_readme_demo.py",
    "tests/bench/test_fleet_quality.py",
)
TIERS = ("slow", "e2e")


class Collected(Protocol):
    """What the order reads of a collected test (a pytest.Item)."""

    @property
    def nodeid(self) -> str: ...

    def get_closest_marker(self, name: str) -> object | None: ...


C = TypeVar("C", bound=Collected)


def module_of(item: Collected) -> str:
    return item.nodeid.split("::")[0]


def longest_first(items: Sequence[C]) -> list[C]:
    """`items` with the long poles' modules first, then by each module's longest tier; stable, so the
    order within a module (and among modules of one tier) is kept."""
    tier: dict[str, int] = {}
    for item in items:
        own = next((n for n, name in enumerate(TIERS) if item.get_closest_marker(name)), len(TIERS))
        tier[module_of(item)] = min(tier.get(module_of(item), len(TIERS)), own)

    def order(item: C) -> tuple[int, int]:
        name = module_of(item)
        return (LONG_POLES.index(name) if name in LONG_POLES else len(LONG_POLES), tier[name])

    return sorted(items, key=order)
