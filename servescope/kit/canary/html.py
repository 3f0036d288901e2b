"""The analysis as one self-contained HTML page: the verdicts, and both revisions' latency distributions
drawn side by side per bucket (inline SVG, no script). The page and its charts are templates
(templates/report.html, bars.svg); every value from Prometheus or the command line (model and revision
names, bucket bounds) reaches them escaped by the template engine (core/html.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from servescope.core.html import Markup, document, render
from servescope.kit.canary.analysis import Analysis
from servescope.kit.canary.judge import Distribution
from servescope.kit.canary.report import HEAD, headline, markdown, shares, table

TEMPLATES = "servescope.kit.canary"
STYLE = (
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}"
    "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px}"
    "th{background:#f3f3f3}.rollback{color:#b00}.promote{color:#070}.inconclusive{color:#a60}"
    ".charts{display:flex;flex-wrap:wrap;gap:16px}"
)
CANARY_COLOUR, STABLE_COLOUR = "#d62728", "#1f77b4"
WIDTH, HEIGHT, MARGIN = 560, 280, 48


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    colour: str


@dataclass(frozen=True)
class Tick:
    """A bucket's bound under its bars, slanted: vLLM's buckets are many and their bounds long (2560)."""

    x: float
    label: str


def bars(title: str, found: Distribution, canary: str, stable: str) -> Markup:
    """Grouped bars: per bucket, the share of each revision's observations (canary left, stable right)."""
    total_c, total_s = sum(found.canary) or 1.0, sum(found.stable) or 1.0
    pairs = [(c / total_c, s / total_s) for c, s in zip(found.canary, found.stable, strict=True)]
    top = max([max(pair) for pair in pairs] + [0.01])
    slot = (WIDTH - 2 * MARGIN) / max(1, len(pairs))
    plot_h = HEIGHT - 2 * MARGIN
    rects: list[Bar] = []
    ticks: list[Tick] = []
    for i, ((c, s), bound) in enumerate(zip(pairs, found.bounds, strict=True)):
        x = MARGIN + i * slot
        for j, (value, colour) in enumerate(((c, CANARY_COLOUR), (s, STABLE_COLOUR))):
            height = plot_h * value / top
            rects.append(
                Bar(x + slot * (0.1 + 0.4 * j), HEIGHT - MARGIN - height, slot * 0.38, height, colour)
            )
        ticks.append(Tick(x + slot / 2, "+Inf" if math.isinf(bound) else f"{bound:g}"))
    return render(
        TEMPLATES,
        "bars.svg",
        title=title,
        rects=rects,
        ticks=ticks,
        legends=[(MARGIN, CANARY_COLOUR, f"canary {canary}"), (WIDTH / 2, STABLE_COLOUR, f"stable {stable}")],
        top=f"{top:.0%}",
        width=WIDTH,
        height=HEIGHT,
        margin=MARGIN,
    )


def page(analysis: Analysis) -> str:
    """The whole page; the Markdown report rides along as its last section, preformatted."""
    charts = [
        (r.title, bars(r.title, r.distribution, analysis.canary, analysis.stable), shares(r.distribution))
        for r in analysis.slis
        if r.distribution is not None
    ]
    body = render(
        TEMPLATES,
        "report.html",
        analysis=analysis,
        headline=headline(analysis),
        head=HEAD,
        rows=table(analysis),
        charts=charts,
        markdown=markdown(analysis),
    )
    return f"{document(f'Canary {analysis.canary}: {analysis.verdict}', body, style=STYLE)}\n"
