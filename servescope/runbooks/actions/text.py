"""How actions show numbers and tables to people: bytes in GiB, rates, ratios, durations, columns."""

from __future__ import annotations

import math

from servescope.core.durations import human_duration


def table(headers: list[str], rows: list[list[str]], indent: str = "  ") -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(indent + line for line in lines)


def gib(value: float | None) -> str:
    return "-" if value is None else f"{value / 2**30:.2f} GiB"


def mib_per_min(value: float | None) -> str:
    return "-" if value is None else f"{value * 60 / 2**20:+.1f} MiB/min"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def duration(seconds: float | None) -> str:
    """Time left, for people: seconds under a minute, else as the exporter's API words it."""
    if seconds is not None and math.isfinite(seconds) and seconds < 60:
        return f"{seconds:.0f} s"
    return human_duration(seconds, never="never (not rising)")


def number(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if value.is_integer() else f"{value:.4g}"
