"""Small self-contained SVG charts (no scripts, no external files) for the capacity and tuning reports."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
WIDTH, HEIGHT, MARGIN = 640, 320, 56
Scale = Callable[[float], float]


@dataclass(slots=True)
class Chart:
    """One chart: series of points, horizontal reference lines, vertical bands."""

    title: str
    x_label: str
    y_label: str
    series: list[tuple[str, list[tuple[float, float]]]] = field(default_factory=list)
    lines: bool = True  # join each series' points
    hlines: list[tuple[float, str]] = field(default_factory=list)
    vbands: list[tuple[float, float, str]] = field(default_factory=list)
    y_cap: float | None = None  # values above (or infinite) are drawn at the cap, marked as off-scale


def _finite(points: Sequence[tuple[float, float]], cap: float | None) -> list[tuple[float, float]]:
    out = []
    for x, raw in points:
        y = cap if cap is not None and (not math.isfinite(raw) or raw > cap) else raw
        if math.isfinite(x) and math.isfinite(y):
            out.append((x, y))
    return out


def _range(values: Sequence[float]) -> tuple[float, float]:
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    low = min(low, 0.0)
    return (low, high * 1.08 if high > low else low + 1.0)


def render(chart: Chart) -> str:
    """The chart as an inline <svg> element."""
    data = [(name, _finite(points, chart.y_cap)) for name, points in chart.series]
    xs = [x for _, pts in data for x, _ in pts] + [v for band in chart.vbands for v in band[:2]]
    ys = [y for _, pts in data for _, y in pts] + [y for y, _ in chart.hlines]
    (x0, x1), (y0, y1) = _range(xs), _range(ys)
    plot_w, plot_h = WIDTH - 2 * MARGIN, HEIGHT - 2 * MARGIN

    def px(x: float) -> float:
        return MARGIN + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return HEIGHT - MARGIN - (y - y0) / (y1 - y0) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" role="img" aria-label="{escape(chart.title)}">',
        f'<text x="{WIDTH / 2}" y="18" text-anchor="middle" font-size="14">{escape(chart.title)}</text>',
    ]
    for low, high, label in chart.vbands:
        parts.append(
            f'<rect x="{px(low):.1f}" y="{MARGIN}" width="{max(1.0, px(high) - px(low)):.1f}" '
            f'height="{plot_h}" fill="#2ca02c" fill-opacity="0.18"><title>{escape(label)}</title></rect>'
        )
    parts += _axes((x0, x1, y0, y1), px, py, chart)
    for y, label in chart.hlines:
        parts.append(
            f'<line x1="{MARGIN}" x2="{WIDTH - MARGIN}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#d62728" '
            f'stroke-dasharray="6 4"/><text x="{WIDTH - MARGIN}" y="{py(y) - 4:.1f}" text-anchor="end" '
            f'font-size="11" fill="#d62728">{escape(label)}</text>'
        )
    for i, (name, points) in enumerate(data):
        parts += _series(i, name, points, (px, py), chart.lines)
    parts.append("</svg>")
    return "\n".join(parts)


def _axes(box: tuple[float, float, float, float], px: Scale, py: Scale, chart: Chart) -> list[str]:
    x0, x1, y0, y1 = box
    bottom, right = HEIGHT - MARGIN, WIDTH - MARGIN
    parts = [
        f'<line x1="{MARGIN}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#333"/>',
        f'<line x1="{MARGIN}" y1="{MARGIN}" x2="{MARGIN}" y2="{bottom}" stroke="#333"/>',
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 12}" text-anchor="middle" font-size="12">'
        f"{escape(chart.x_label)}</text>",
        f'<text x="14" y="{HEIGHT / 2}" text-anchor="middle" font-size="12" '
        f'transform="rotate(-90 14 {HEIGHT / 2})">{escape(chart.y_label)}</text>',
    ]
    for k in range(5):
        xv, yv = x0 + (x1 - x0) * k / 4, y0 + (y1 - y0) * k / 4
        parts.append(
            f'<text x="{px(xv):.1f}" y="{bottom + 16}" text-anchor="middle" font-size="10">{xv:.3g}</text>'
        )
        parts.append(
            f'<text x="{MARGIN - 6}" y="{py(yv) + 3:.1f}" text-anchor="end" font-size="10">{yv:.3g}</text>'
        )
    return parts


def _series(
    index: int, name: str, points: list[tuple[float, float]], scale: tuple[Scale, Scale], lines: bool
) -> list[str]:
    px, py = scale
    colour = PALETTE[index % len(PALETTE)]
    parts = []
    if lines and len(points) > 1:
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(points))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.6" points="{path}"/>')
    for x, y in points:
        parts.append(
            f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}">'
            f"<title>{escape(name)}: ({x:.3g}, {y:.3g})</title></circle>"
        )
    legend_y = MARGIN + 14 * index
    parts.append(
        f'<text x="{MARGIN + 8}" y="{legend_y + 4}" font-size="11" fill="{colour}">{escape(name)}</text>'
    )
    return parts
