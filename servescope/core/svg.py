"""Small self-contained SVG charts (no scripts, no external files): the capacity and tuning reports'
charts and the exporter's GPU memory picture.

A chart is series of points (each drawn in a palette colour or its own style, joined or not, with or
without a marker per point), straight lines (a reference across the plot, a trend), vertical bands (an
interval), axes with ticks in the caller's units and a note. Every text is escaped: titles and series
names come from scraped labels and command lines.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
Point = tuple[float, float]
Format = Callable[[float], str]


def general(value: float) -> str:
    """A tick's value in three significant digits."""
    return f"{value:.3g}"


@dataclass(frozen=True, slots=True)
class Style:
    """How a line is stroked; `css_class` names it for readers of the SVG (and tests)."""

    colour: str
    css_class: str = ""
    dash: str = ""  # stroke-dasharray; empty: solid
    width: float = 1.6

    def attributes(self) -> str:
        named = f' class="{self.css_class}"' if self.css_class else ""
        dashed = f' stroke-dasharray="{self.dash}"' if self.dash else ""
        return f'{named} stroke="{self.colour}" stroke-width="{self.width:g}"{dashed}'


REFERENCE = Style("#d62728", dash="6 4", width=1.0)


@dataclass(frozen=True, slots=True)
class Line:
    """A straight line from `start` to `end` (a trend), with an optional label at its right end; x is held
    inside the plot, so a reference line from -inf to +inf spans it."""

    start: Point
    end: Point
    style: Style = REFERENCE
    label: str = ""


def hline(y: float, label: str, style: Style = REFERENCE) -> Line:
    """A horizontal reference line across the whole plot, labelled at its right end."""
    return Line((-math.inf, y), (math.inf, y), style, label)


@dataclass(frozen=True, slots=True)
class Frame:
    """The picture's size and the margins around its plot, in pixels."""

    width: int = 640
    height: int = 320
    margins: tuple[int, int, int, int] = (56, 56, 56, 56)  # left, right, top, bottom

    @property
    def edges(self) -> tuple[int, int, int, int]:
        """The plot's left, right, top and bottom edges."""
        left, right, top, bottom = self.margins
        return left, self.width - right, top, self.height - bottom


@dataclass(slots=True)
class Series:
    """Named points; without a style the series takes the palette's colour of its place."""

    name: str
    points: list[Point]
    style: Style | None = None
    markers: bool = True  # a dot per point, its value as a tooltip
    legend: bool = True


@dataclass(slots=True)
class Chart:
    """One chart. Without an explicit range an axis spans its data (and zero), with headroom on top."""

    title: str
    x_label: str = ""
    y_label: str = ""
    series: list[Series] = field(default_factory=list)
    join: bool = True  # join each series' points
    lines: list[Line] = field(default_factory=list)  # references and trends
    vbands: list[tuple[float, float, str]] = field(default_factory=list)
    y_cap: float | None = None  # values above (or infinite) are drawn at the cap, marked as off-scale
    x_range: tuple[float, float] | None = None
    y_range: tuple[float, float] | None = None  # values outside are drawn at its edge
    x_format: Format = general
    y_format: Format = general
    ticks: int = 4  # intervals between the ticks of each axis
    note: str = ""  # a line of text at the plot's top left
    empty: str = ""  # what the plot says when no series has a point
    background: str = ""  # a fill colour for the whole picture
    frame: Frame = field(default_factory=Frame)


def _finite(points: Sequence[Point], cap: float | None) -> list[Point]:
    out = []
    for x, raw in points:
        y = cap if cap is not None and (not math.isfinite(raw) or raw > cap) else raw
        if math.isfinite(x) and math.isfinite(y):
            out.append((x, y))
    return out


def _span(values: Sequence[float]) -> tuple[float, float]:
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    low = min(low, 0.0)
    return (low, high * 1.08 if high > low else low + 1.0)


@dataclass(frozen=True, slots=True)
class _Scale:
    """Data to pixels, held inside the plot: a line leaving a range runs along the plot's edge."""

    frame: Frame
    x0: float
    x1: float
    y0: float
    y1: float

    def x(self, value: float) -> float:
        left, right, _, _ = self.frame.edges
        share = (min(max(value, self.x0), self.x1) - self.x0) / (self.x1 - self.x0)
        return left + share * (right - left)

    def y(self, value: float) -> float:
        _, _, top, bottom = self.frame.edges
        share = (min(max(value, self.y0), self.y1) - self.y0) / (self.y1 - self.y0)
        return bottom - share * (bottom - top)


def _scale(chart: Chart, data: list[Series]) -> _Scale:
    ends = [end for line in chart.lines for end in (line.start, line.end)]
    xs = [x for s in data for x, _ in s.points] + [v for band in chart.vbands for v in band[:2]]
    ys = [y for s in data for _, y in s.points]
    x0, x1 = chart.x_range or _span(xs + [x for x, _ in ends if math.isfinite(x)])
    y0, y1 = chart.y_range or _span(ys + [y for _, y in ends if math.isfinite(y)])
    return _Scale(chart.frame, x0, x1, y0, y1)


def render(chart: Chart) -> str:
    """The chart as an inline <svg> element (also a whole SVG document)."""
    data = [
        Series(s.name, _finite(s.points, chart.y_cap), s.style, s.markers, s.legend) for s in chart.series
    ]
    scale, f = _scale(chart, data), chart.frame
    left, _, top, bottom = f.edges
    title = escape(chart.title)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {f.width} {f.height}" width="{f.width}" '
        f'height="{f.height}" role="img" aria-label="{title}" font-family="sans-serif">',
    ]
    if chart.background:
        parts.append(f'<rect width="{f.width}" height="{f.height}" fill="{chart.background}"/>')
    parts.append(f'<text x="{f.width / 2:g}" y="18" text-anchor="middle" font-size="14">{title}</text>')
    for low, high, label in chart.vbands:
        parts.append(
            f'<rect x="{scale.x(low):.1f}" y="{top}" width="{max(1.0, scale.x(high) - scale.x(low)):.1f}" '
            f'height="{bottom - top}" fill="#2ca02c" fill-opacity="0.18"><title>{escape(label)}</title>'
            "</rect>"
        )
    parts += _axes(chart, scale)
    parts += [_line(line, scale) for line in chart.lines]
    for index, series in enumerate(data):
        parts += _series(index, series, scale, chart.join)
    if chart.empty and not any(s.points for s in data):
        parts.append(
            f'<text x="{f.width / 2:g}" y="{f.height / 2:g}" text-anchor="middle">'
            f"{escape(chart.empty)}</text>"
        )
    if chart.note:
        parts.append(
            f'<text class="note" x="{left + 6}" y="{top + 14}" font-size="12" fill="#d62728">'
            f"{escape(chart.note)}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _axes(chart: Chart, scale: _Scale) -> list[str]:
    f = chart.frame
    left, right, top, bottom = f.edges
    parts = [
        f'<line class="axis" x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#333"/>',
        f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#333"/>',
    ]
    if chart.x_label:
        parts.append(
            f'<text x="{f.width / 2:g}" y="{f.height - 12}" text-anchor="middle" font-size="12">'
            f"{escape(chart.x_label)}</text>"
        )
    if chart.y_label:
        parts.append(
            f'<text x="14" y="{f.height / 2:g}" text-anchor="middle" font-size="12" '
            f'transform="rotate(-90 14 {f.height / 2:g})">{escape(chart.y_label)}</text>'
        )
    for k in range(chart.ticks + 1):
        xv = scale.x0 + (scale.x1 - scale.x0) * k / chart.ticks
        yv = scale.y0 + (scale.y1 - scale.y0) * k / chart.ticks
        parts.append(
            f'<text x="{scale.x(xv):.1f}" y="{bottom + 16}" text-anchor="middle" font-size="10">'
            f"{escape(chart.x_format(xv))}</text>"
        )
        parts.append(
            f'<text x="{left - 6}" y="{scale.y(yv) + 3:.1f}" text-anchor="end" font-size="10">'
            f"{escape(chart.y_format(yv))}</text>"
        )
    return parts


def _line(line: Line, scale: _Scale) -> str:
    (xa, ya), (xb, yb) = line.start, line.end
    drawn = (
        f'<line x1="{scale.x(xa):.1f}" y1="{scale.y(ya):.1f}" x2="{scale.x(xb):.1f}" '
        f'y2="{scale.y(yb):.1f}"{line.style.attributes()}/>'
    )
    if not line.label:
        return drawn
    return (
        f'{drawn}<text x="{scale.x(xb) - 4:.1f}" y="{scale.y(yb) - 4:.1f}" text-anchor="end" '
        f'font-size="11" fill="{line.style.colour}">{escape(line.label)}</text>'
    )


def _series(index: int, series: Series, scale: _Scale, join: bool) -> list[str]:
    style = series.style or Style(PALETTE[index % len(PALETTE)])
    parts = []
    if join and len(series.points) > 1:
        path = " ".join(f"{scale.x(x):.1f},{scale.y(y):.1f}" for x, y in sorted(series.points))
        parts.append(f'<polyline fill="none"{style.attributes()} points="{path}"/>')
    name = escape(series.name)
    if series.markers:
        for x, y in series.points:
            parts.append(
                f'<circle cx="{scale.x(x):.1f}" cy="{scale.y(y):.1f}" r="3" fill="{style.colour}">'
                f"<title>{name}: ({x:.3g}, {y:.3g})</title></circle>"
            )
    if series.legend:
        left, _, top, _ = scale.frame.edges
        legend_y = top + 14 * index
        parts.append(
            f'<text x="{left + 8}" y="{legend_y + 4}" font-size="11" fill="{style.colour}">{name}</text>'
        )
    return parts
