"""Both parsers' results as plain tuples, so that ours and prometheus_client's compare with ==."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from servescope.core.exposition import ExpositionError, parse_exposition

Normalised = list[tuple[str, str, str, list[tuple[str, tuple[tuple[str, str], ...], object]]]]


def _comparable(value: float) -> object:
    """A comparable value: NaN equals NaN; upstream's huge ints (beyond float) become infinities."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf if value > 0 else -math.inf
    return "NaN" if math.isnan(number) else number


def normalise(families: Iterable[Any]) -> Normalised:
    """Families as plain tuples, so both parsers' results compare with ==."""
    return [
        (
            f.name,
            f.type,
            f.documentation,
            [(s.name, tuple(sorted(s.labels.items())), _comparable(s.value)) for s in f.samples],
        )
        for f in families
    ]


def reference(text: str) -> Normalised | None:
    """prometheus_client's reading, or None where it raises (anything: it is not only ValueError)."""
    try:
        families = list(text_string_to_metric_families(text))
    except Exception:
        return None
    return normalise(families)


def ours(text: str, keep: Callable[[str], bool] | None = None) -> Normalised | None:
    try:
        families = parse_exposition(text, keep)
    except ExpositionError:
        return None
    return normalise(families)
