"""The analysis as one self-contained HTML page: the verdicts, and both revisions' latency distributions
drawn side by side per bucket (inline SVG, no script). Every value from Prometheus or the command line
(model and revision names, bucket bounds) is escaped."""

from __future__ import annotations

import math

from servescope.canary.analysis import Analysis
from servescope.canary.judge import Distribution
from servescope.canary.report import HEAD, headline, markdown, shares, table
from servescope.common.html import esc

STYLE = (
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}"
    "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px}"
    "th{background:#f3f3f3}.rollback{color:#b00}.promote{color:#070}.inconclusive{color:#a60}"
    ".charts{display:flex;flex-wrap:wrap;gap:16px}"
)
CANARY_COLOUR, STABLE_COLOUR = "#d62728", "#1f77b4"
WIDTH, HEIGHT, MARGIN = 560, 280, 48


def bars(title: str, found: Distribution, canary: str, stable: str) -> str:
    """Grouped bars: per bucket, the share of each revision's observations (canary left, stable right)."""
    total_c, total_s = sum(found.canary) or 1.0, sum(found.stable) or 1.0
    shares = [(c / total_c, s / total_s) for c, s in zip(found.canary, found.stable, strict=True)]
    top = max([max(pair) for pair in shares] + [0.01])
    slot = (WIDTH - 2 * MARGIN) / max(1, len(shares))
    plot_h = HEIGHT - 2 * MARGIN
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" role="img" aria-label="{esc(title)}">',
        f'<text x="{MARGIN}" y="18" font-size="13">{esc(title)}</text>',
        f'<line x1="{MARGIN}" y1="{HEIGHT - MARGIN}" x2="{WIDTH - MARGIN}" y2="{HEIGHT - MARGIN}" '
        'stroke="#888"/>',
    ]
    for i, ((c, s), bound) in enumerate(zip(shares, found.bounds, strict=True)):
        x = MARGIN + i * slot
        for j, (value, colour) in enumerate(((c, CANARY_COLOUR), (s, STABLE_COLOUR))):
            height = plot_h * value / top
            parts.append(
                f'<rect x="{x + slot * (0.1 + 0.4 * j):.1f}" y="{HEIGHT - MARGIN - height:.1f}" '
                f'width="{slot * 0.38:.1f}" height="{height:.1f}" fill="{colour}"/>'
            )
        parts.append(_bound(x + slot / 2, bound))
    parts += [
        _legend(MARGIN, CANARY_COLOUR, f"canary {canary}"),
        _legend(WIDTH / 2, STABLE_COLOUR, f"stable {stable}"),
        f'<text x="4" y="{MARGIN}" font-size="10">{top:.0%}</text>',
        "</svg>",
    ]
    return "".join(parts)


def _bound(x: float, bound: float) -> str:
    """A bucket's bound under its bars, slanted: vLLM's buckets are many and their bounds long (2560)."""
    label, y = "+Inf" if math.isinf(bound) else f"{bound:g}", HEIGHT - MARGIN + 10
    return (
        f'<text x="{x:.1f}" y="{y}" font-size="9" text-anchor="end" '
        f'transform="rotate(-45 {x:.1f} {y})">{esc(label)}</text>'
    )


def _legend(x: float, colour: str, words: str) -> str:
    return f'<text x="{x:.0f}" y="{HEIGHT - 8}" font-size="11" fill="{colour}">{esc(words)}</text>'


def _table(analysis: Analysis) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in HEAD)
    rows = [
        f'<tr><td>{esc(title)}</td><td class="{esc(verdict)}">{esc(verdict)}</td>'
        + "".join(f"<td>{esc(cell)}</td>" for cell in rest)
        + "</tr>"
        for title, verdict, *rest in table(analysis)
    ]
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _distribution_tables(analysis: Analysis) -> str:
    out = []
    for r in analysis.slis:
        if r.distribution is None:
            continue
        rows = "".join(
            f"<tr>{''.join(f'<td>{esc(cell)}</td>' for cell in row)}</tr>" for row in shares(r.distribution)
        )
        out.append(
            f"<div><h3>{esc(r.title)}</h3>{bars(r.title, r.distribution, analysis.canary, analysis.stable)}"
            f"<table><tr><th>bucket</th><th>canary</th><th>stable</th></tr>{rows}</table></div>"
        )
    return f'<div class="charts">{"".join(out)}</div>'


def page(analysis: Analysis) -> str:
    """The whole page; the Markdown report rides along as its last section, preformatted."""
    verdict = esc(analysis.verdict)
    tests = "".join(
        f"<li><b>{esc(r.title)}</b>: {esc(r.sli.test)}. {esc(r.sli.why)}</li>" for r in analysis.slis
    )
    body = (
        f'<h1>Canary analysis: <span class="{verdict}">{verdict}</span></h1>'
        f"<p>{esc(headline(analysis))}</p>{_table(analysis)}"
        f"<h2>Both distributions</h2>{_distribution_tables(analysis)}"
        f"<h2>The tests, and why</h2><ul>{tests}</ul>"
        f"<details><summary>Markdown</summary><pre>{esc(markdown(analysis))}</pre></details>"
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc('Canary ' + analysis.canary + ': ' + analysis.verdict)}</title>"
        f"<style>{STYLE}</style></head><body>{body}</body></html>\n"
    )
