"""Bucket bounds below a latency bound, as a regular expression on `le`: where an engine's histogram has no
bucket at the SLO's bound, its requests are counted from the nearest lower bucket.

Prometheus compares label values as strings, so "every bucket below 0.5 s" is a regular expression over
the decimal strings engines write (`0.25`, `0.4`, `1.0`, `1e-05`), written without backslashes (`[.]`,
`[0-9]`) so that it needs no escaping inside a PromQL string. `max` of the cumulative counts of those
buckets is the count of the nearest one: cumulative counts never decrease with `le`.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_DECIMAL = re.compile(r"^(\d+)(?:\.(\d*))?$")
# Python (and so vLLM) writes a float in exponent form only under 1e-4 (1e-05, 2.5e-06): such a bucket is
# below any bound from 0.0001 up.
_SMALL = "[0-9](?:[.][0-9]+)?e-0*(?:[5-9]|[1-9][0-9]+)"
_SMALL_BELOW = Decimal("0.0001")
_FRACTION = "(?:[.][0-9]*)?"


def below(bound: str) -> str:
    """A regex matching the decimal strings of every number >= 0 strictly below `bound` (e.g. "0.5")."""
    match = _DECIMAL.match(bound)
    if match is None:
        raise ValueError(f"{bound!r}: a latency bound is a plain decimal such as 0.5 or 60.0")
    whole, fraction = match.group(1).lstrip("0") or "0", (match.group(2) or "").rstrip("0")
    alternatives = [f"(?:{smaller}){_FRACTION}" for smaller in _integers_below(whole)]
    alternatives += [f"{whole}[.]{part}" for part in _fractions_below(fraction)]
    if fraction:
        alternatives.append(f"{whole}(?:[.]0*)?")  # the whole part itself: 0 or 0.0 for a bound of 0.5
    if Decimal(bound) >= _SMALL_BELOW:
        alternatives.append(_SMALL)
    return "|".join(alternatives)


def _integers_below(whole: str) -> list[str]:
    """Regexes of the integers 0 .. whole-1 written without leading zeros (none when whole is 0)."""
    if whole == "0":
        return []
    found = ["0"]
    for digits in range(1, len(whole)):
        found.append("[1-9]" + "[0-9]" * (digits - 1))
    for k, digit in enumerate(whole):
        lowest = 1 if k == 0 else 0
        top = int(digit) - 1
        if top < lowest:
            continue
        rest = "[0-9]" * (len(whole) - k - 1)
        found.append(f"{whole[:k]}[{lowest}-{top}]{rest}")
    return found


def _fractions_below(fraction: str) -> list[str]:
    """Regexes of the fraction digits f with 0.f < 0.<fraction> (a trailing run of digits is free)."""
    found = []
    for k, digit in enumerate(fraction):
        if int(digit) > 0:
            found.append(f"{fraction[:k]}[0-{int(digit) - 1}][0-9]*")
            if k:
                found.append(fraction[:k])  # a shorter prefix: 0.2 is below 0.25
    return found


def is_below(value: str, bound: str) -> bool:
    """What `below` means, for the tests: `value` < `bound` as numbers (False for what is not a number)."""
    try:
        return Decimal(value) < Decimal(bound)
    except InvalidOperation:
        return False
