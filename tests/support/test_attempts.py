"""until_holds: measures again until one holds, at most its attempts, keeping every measurement."""

from __future__ import annotations

from tests.support.attempts import until_holds


def test_it_stops_at_the_first_that_holds_and_keeps_the_ones_before() -> None:
    seeds: list[int] = []
    measured = until_holds(
        lambda seed: seeds.append(seed) or seed * 10, lambda value: value >= 30, first_seed=2
    )
    assert measured == [20, 30] and seeds == [2, 3]


def test_none_holding_gives_every_attempt() -> None:
    assert until_holds(lambda seed: seed, lambda value: False, attempts=4) == [1, 2, 3, 4]
