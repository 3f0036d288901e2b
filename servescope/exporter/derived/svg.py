"""Standalone SVG picture of a GPU memory curve, its trend and the capacity line (drawn by core/svg.py)."""

from __future__ import annotations

from collections.abc import Sequence

from servescope.core.svg import Chart, Frame, Line, Series, Style, hline, render

GIB = 1024**3
TICKS = 5
MARGINS = (70, 20, 30, 40)  # left, right, top, bottom: room for the GiB ticks
MEMORY = Style("#1f77b4", "memory", width=1.5)
TREND = Style("#d62728", "trend", dash="6,4", width=1.0)
CAPACITY = Style("#444", "capacity", width=1.0)


def _relative_label(rel_s: float) -> str:
    """A time tick relative to now: `now`, `-45s`, `-10m`."""
    seconds = -rel_s
    if seconds == 0:
        return "now"
    if seconds >= 120:
        return f"-{seconds / 60:.0f}m"
    return f"-{seconds:.0f}s"


def _gib(value: float) -> str:
    return f"{value / GIB:.1f} GiB"


def render_memory_svg(
    times: Sequence[float],
    values: Sequence[float],
    total_bytes: float,
    slope: float | None = None,
    *,
    width: int = 800,
    height: int = 300,
    title: str = "",
    note: str = "",
) -> str:
    """SVG document (no scripts, no external assets) of memory used over time; slope in bytes/s."""
    if len(times) != len(values):
        raise ValueError(f"times and values differ in length: {len(times)} vs {len(values)}")
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    span = span if span > 0 else 60.0
    top = max([total_bytes, *values]) * 1.02 if (values or total_bytes > 0) else 1.0
    top = top if top > 0 else 1.0
    # The axis starts below the lowest sample, not at zero: a 2 GiB climb on a 141 GiB card must be
    # visible, and the gap up to the capacity line is the headroom people want to see.
    bottom = max(0.0, min(values) - 0.25 * (top - min(values))) if values else 0.0
    chart = Chart(title, note=note, empty="no data", background="white", frame=Frame(width, height, MARGINS))
    # Time runs to the newest sample ("now"); memory in GiB from just below the curve to above the capacity.
    chart.x_range, chart.x_format = (-span, 0.0), _relative_label
    chart.y_range, chart.y_format = (bottom if bottom < top else 0.0, top), _gib
    chart.ticks = TICKS
    if total_bytes > 0:
        chart.lines.append(hline(total_bytes, f"capacity {_gib(total_bytes)}", CAPACITY))
    if values:
        now = times[-1]
        relative = [(t - now, v) for t, v in zip(times, values, strict=True)]
        chart.series.append(Series("memory used", relative, MEMORY, markers=False, legend=False))
        if slope is not None:
            # Dashed line with the given slope through the newest sample, across the plotted window.
            start = (-span, values[-1] - slope * span)
            chart.lines.append(Line(start, (0.0, values[-1]), TREND))
    return render(chart)
