"""Standalone SVG picture of a GPU memory curve, its trend and the capacity line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

GIB = 1024**3
_MARGIN_LEFT, _MARGIN_RIGHT, _MARGIN_TOP, _MARGIN_BOTTOM = 70, 20, 30, 40
_TICKS = 5


def _text(value: str) -> str:
    """Escape for both element text and attribute values: titles come from untrusted labels."""
    return escape(value, {'"': "&quot;", "'": "&apos;"})


@dataclass(frozen=True)
class _Frame:
    """Maps (seconds relative to now, bytes) onto plot pixels."""

    width: int
    height: int
    span_s: float
    top_bytes: float
    bottom_bytes: float = 0.0

    def x(self, rel_s: float) -> float:
        plot_w = self.width - _MARGIN_LEFT - _MARGIN_RIGHT
        return _MARGIN_LEFT + plot_w * (1 + rel_s / self.span_s)

    def y(self, value: float) -> float:
        plot_h = self.height - _MARGIN_TOP - _MARGIN_BOTTOM
        clipped = min(max(value, self.bottom_bytes), self.top_bytes)
        share = (clipped - self.bottom_bytes) / (self.top_bytes - self.bottom_bytes)
        return _MARGIN_TOP + plot_h * (1 - share)


def _relative_label(seconds: float) -> str:
    if seconds == 0:
        return "now"
    if seconds >= 120:
        return f"-{seconds / 60:.0f}m"
    return f"-{seconds:.0f}s"


def _axes(frame: _Frame) -> list[str]:
    """Axis lines with time ticks (relative to now) and GiB ticks."""
    x0, x1 = frame.x(-frame.span_s), frame.x(0)
    y0, y1 = frame.y(frame.bottom_bytes), frame.y(frame.top_bytes)
    parts = [
        f'<line class="axis" x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y0:.1f}" stroke="#333"/>',
        f'<line class="axis" x1="{x0:.1f}" y1="{y0:.1f}" x2="{x0:.1f}" y2="{y1:.1f}" stroke="#333"/>',
    ]
    for i in range(_TICKS + 1):
        rel = -frame.span_s * (1 - i / _TICKS)
        parts.append(
            f'<text x="{frame.x(rel):.1f}" y="{y0 + 16:.1f}" font-size="11" text-anchor="middle">'
            f"{_relative_label(-rel)}</text>"
        )
        value = frame.bottom_bytes + (frame.top_bytes - frame.bottom_bytes) * i / _TICKS
        parts.append(
            f'<text x="{x0 - 6:.1f}" y="{frame.y(value) + 4:.1f}" font-size="11" text-anchor="end">'
            f"{value / GIB:.1f} GiB</text>"
        )
    return parts


def _curve(frame: _Frame, times: Sequence[float], values: Sequence[float]) -> str:
    now = times[-1]
    points = " ".join(f"{frame.x(t - now):.1f},{frame.y(v):.1f}" for t, v in zip(times, values, strict=True))
    return f'<polyline class="memory" fill="none" stroke="#1f77b4" stroke-width="1.5" points="{points}"/>'


def _trend(frame: _Frame, times: Sequence[float], values: Sequence[float], slope: float) -> str:
    """Dashed line with the given slope through the newest sample, across the plotted window."""
    start_value = values[-1] - slope * frame.span_s
    return (
        f'<line class="trend" x1="{frame.x(-frame.span_s):.1f}" y1="{frame.y(start_value):.1f}" '
        f'x2="{frame.x(0):.1f}" y2="{frame.y(values[-1]):.1f}" stroke="#d62728" stroke-dasharray="6,4"/>'
    )


def _capacity(frame: _Frame, total_bytes: float) -> list[str]:
    y = frame.y(total_bytes)
    return [
        f'<line class="capacity" x1="{frame.x(-frame.span_s):.1f}" y1="{y:.1f}" x2="{frame.x(0):.1f}" '
        f'y2="{y:.1f}" stroke="#444" stroke-width="1"/>',
        f'<text x="{frame.x(0) - 4:.1f}" y="{y - 4:.1f}" font-size="11" text-anchor="end">'
        f"capacity {total_bytes / GIB:.1f} GiB</text>",
    ]


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
    top = max([total_bytes, *values]) * 1.02 if (values or total_bytes > 0) else 1.0
    top = top if top > 0 else 1.0
    # The axis starts below the lowest sample, not at zero: a 2 GiB climb on a 141 GiB card must be
    # visible, and the gap up to the capacity line is the headroom people want to see.
    bottom = max(0.0, min(values) - 0.25 * (top - min(values))) if values else 0.0
    frame = _Frame(width, height, span if span > 0 else 60.0, top, bottom if bottom < top else 0.0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2:.1f}" y="18" font-size="14" text-anchor="middle">{_text(title)}</text>',
        f'<text class="note" x="{_MARGIN_LEFT + 6}" y="{_MARGIN_TOP + 14}" font-size="12" fill="#d62728">'
        f"{_text(note)}</text>",
        *_axes(frame),
    ]
    if total_bytes > 0:
        parts.extend(_capacity(frame, total_bytes))
    if values:
        parts.append(_curve(frame, times, values))
        if slope is not None:
            parts.append(_trend(frame, times, values, slope))
    else:
        parts.append(f'<text x="{width / 2:.1f}" y="{height / 2:.1f}" text-anchor="middle">no data</text>')
    parts.append("</svg>")
    return "\n".join(parts)
