"""Prometheus durations (`90s`, `1h30m`, `500ms`), parsed and written one way for the whole package."""

from __future__ import annotations

import math
import re

from servescope.core.errors import ServescopeError

UNIT_SECONDS = {"y": 31536000.0, "w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
# Prometheus's grammar: units largest first, each at most once, at least one part.
_DURATION = re.compile(r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$")
_UNITS_IN_ORDER = ("y", "w", "d", "h", "m", "s", "ms")


class DurationError(ServescopeError, ValueError):
    """Text that is not a Prometheus duration; the message names it."""

    reason = "duration_invalid"


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus duration such as `5m` or `1h30m`; raises DurationError naming the text."""
    found = _DURATION.match(text)
    if not text or found is None or not any(found.groups()):
        raise DurationError(f"{text!r} is not a Prometheus duration such as 30s, 5m or 1h30m")
    return sum(
        int(n) * UNIT_SECONDS[unit] for n, unit in zip(found.groups(), _UNITS_IN_ORDER, strict=True) if n
    )


def is_duration(text: str) -> bool:
    try:
        parse_duration(text)
    except DurationError:
        return False
    return True


def format_duration(seconds: float) -> str:
    """The shortest Prometheus duration for a whole number of milliseconds (`90` -> `1m30s`)."""
    if seconds < 0 or not math.isfinite(seconds):
        raise DurationError(f"{seconds!r} seconds cannot be written as a Prometheus duration")
    millis = round(seconds * 1000)
    parts: list[str] = []
    for unit in _UNITS_IN_ORDER:
        size = round(UNIT_SECONDS[unit] * 1000)
        count, millis = divmod(millis, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def human_duration(seconds: float | None, *, never: str = "never") -> str:
    """For people, not PromQL: `42 min`, `3.5 h`, `2.0 d`; None or infinity is `never`."""
    if seconds is None or not math.isfinite(seconds):
        return never
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"
