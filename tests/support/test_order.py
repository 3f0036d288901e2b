"""The collection order: the long poles, then modules by their longest tier; each module's own order kept."""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.support.order import LONG_POLES, longest_first


@dataclass
class Item:
    nodeid: str
    markers: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def test_poles_then_slow_then_e2e_modules_each_in_its_own_order() -> None:
    items = [
        Item("tests/a/test_unit.py::test_one"),
        Item("tests/b/test_mixed.py::test_quick"),
        Item("tests/b/test_mixed.py::test_long", {"slow", "e2e"}),
        Item("tests/c/test_e2e.py::test_server", {"e2e"}),
        Item(f"{LONG_POLES[1]}::test_first", {"slow"}),
        Item(f"{LONG_POLES[0]}::test_stack", {"slow"}),
        Item(f"{LONG_POLES[1]}::test_second"),
        Item("tests/a/test_unit.py::test_two"),
    ]
    assert [i.nodeid for i in longest_first(items)] == [
        f"{LONG_POLES[0]}::test_stack",
        f"{LONG_POLES[1]}::test_first",
        f"{LONG_POLES[1]}::test_second",
        "tests/b/test_mixed.py::test_quick",  # the module holds a slow test: it goes whole, in its order
        "tests/b/test_mixed.py::test_long",
        "tests/c/test_e2e.py::test_server",
        "tests/a/test_unit.py::test_one",
        "tests/a/test_unit.py::test_two",
    ]
