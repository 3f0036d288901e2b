"""Measuring again what a starved machine spoiled: a step the shared 2-core machine delayed is rightly
invalid, so a timing test measures up to ATTEMPTS times, and one measurement must hold."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
ATTEMPTS = 3


def until_holds(
    measure: Callable[[int], T], holds: Callable[[T], bool], attempts: int = ATTEMPTS, first_seed: int = 1
) -> list[T]:
    """Every measurement, in order, with seeds from `first_seed`, stopping at the first that holds: the
    last one holds, or none did (the caller asserts on the last and quotes them all)."""
    measured: list[T] = []
    for seed in range(first_seed, first_seed + attempts):
        measured.append(measure(seed))
        if holds(measured[-1]):
            break
    return measured
