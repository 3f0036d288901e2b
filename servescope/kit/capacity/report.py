"""Capacity reports readable without Grafana: Markdown, and self-contained HTML with inline SVG charts."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from html import escape

from servescope.kit.capacity.result import CapacityRun
from servescope.kit.capacity.svg import Chart, render

STYLE = (
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1400px}"
    "table{border-collapse:collapse;margin:8px 0}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "th{background:#f3f3f3}.charts{display:flex;flex-wrap:wrap;gap:12px}.bad{color:#d62728}"
)


def _by_rate(run: CapacityRun, key: str) -> list[tuple[float, float]]:
    """(offered, median over seeds of a step field or percentile)."""
    found: dict[float, list[float]] = defaultdict(list)
    for step in run.steps:
        value = step.percentiles[key] if key in step.percentiles else float(getattr(step, key))
        found[step.offered].append(value)
    return [(rate, statistics.median(values)) for rate, values in sorted(found.items())]


def slo_key(run: CapacityRun) -> str:
    slo = run.plan.slos[0]
    return f"p{slo.quantile * 100:g}_{slo.metric}"


def latency_chart(runs: Sequence[CapacityRun]) -> Chart:
    """Offered rate against the first SLO's percentile, with the SLO line and each knee's interval."""
    slo = runs[0].plan.slos[0]
    chart = Chart(
        f"Offered rate vs {slo.metric} p{slo.quantile * 100:g}",
        "offered (requests/s)",
        "seconds",
        hlines=[(slo.limit_s, f"SLO {slo.limit_s * 1000:g} ms")],
        y_cap=slo.limit_s * 4,
    )
    for run in runs:
        chart.series.append((run.label, _by_rate(run, slo_key(run))))
        chart.vbands.append((run.knee.lower, run.knee.upper, f"{run.label} knee interval"))
    return chart


def goodput_chart(runs: Sequence[CapacityRun]) -> Chart:
    chart = Chart("Goodput (requests/s meeting every SLO)", "offered (requests/s)", "goodput (requests/s)")
    chart.series = [(run.label, _by_rate(run, "goodput")) for run in runs]
    return chart


def batch_chart(runs: Sequence[CapacityRun]) -> Chart:
    chart = Chart("Throughput vs running batch", "mean running batch", "output tokens/s", lines=False)
    for run in runs:
        points = [(s.mean_running, s.throughput_tokens) for s in run.steps if math.isfinite(s.mean_running)]
        chart.series.append((run.label, points))
    return chart


def summary_rows(runs: Sequence[CapacityRun]) -> list[list[str]]:
    """Header and one row per run: knee, interval, sizing, cross-check."""
    rows = [["configuration", "knee req/s", "interval", "replicas (GPUs) for peak", "client vs engine TTFT"]]
    for run in runs:
        k = run.knee
        note = " (pruned)" if k.pruned else (" (above max_qps)" if k.reached_max else "")
        sizing = "-" if run.provision is None else f"{run.provision.replicas} ({run.provision.gpus})"
        disagree = sum(1 for c in run.cross_checks if not c.agrees)
        check = (
            "-"
            if not run.cross_checks
            else f"{len(run.cross_checks) - disagree}/{len(run.cross_checks)} agree"
        )
        rows.append([run.label, f"{k.estimate:.2f}{note}", f"[{k.lower:.2f}, {k.upper:.2f}]", sizing, check])
    return rows


def batch_matrix(runs: Sequence[CapacityRun]) -> list[list[str]]:
    """The batching-efficiency matrix: tokens/s (and mean batch) per configuration and offered rate."""
    rates = sorted({round(s.offered, 2) for run in runs for s in run.steps})
    rows = [["configuration", *(f"{r:g} req/s" for r in rates)]]
    for run in runs:
        cells: dict[float, str] = {}
        for step in run.steps:
            mark = "" if step.meets else "*"
            cells[round(step.offered, 2)] = f"{step.throughput_tokens:.0f} @ {step.mean_running:.0f}{mark}"
        rows.append([run.label, *(cells.get(r, "") for r in rates)])
    return rows


def markdown_table(rows: Sequence[Sequence[str]]) -> str:
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body])


def html_table(rows: Sequence[Sequence[str]]) -> str:
    head, *body = rows
    cells = "".join(f"<th>{escape(c)}</th>" for c in head)
    out = [f"<table><tr>{cells}</tr>"]
    out += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in body]
    return "\n".join([*out, "</table>"])


def capacity_markdown(runs: Sequence[CapacityRun], title: str = "Capacity") -> str:
    """The runs as Markdown: SLOs, knee table, sizing, the batching matrix, cross-check disagreements."""
    slos = ", ".join(slo.label for slo in runs[0].plan.slos)
    parts = [f"# {title}", "", f"SLOs: {slos}.", "", markdown_table(summary_rows(runs)), ""]
    for run in runs:
        if run.provision is not None:
            p = run.provision
            parts.append(
                f"- {run.label}: {p.replicas} replicas ({p.gpus} GPUs) for {p.peak_qps:g} req/s at peak, "
                f"each loaded to {p.per_replica_qps:.2f} req/s ({p.buffer:.0%} below the knee's lower bound)."
            )
        for check in run.cross_checks:
            if not check.agrees:
                parts.append(
                    f"- {run.label} at {check.offered:g} req/s: client p99 TTFT {check.client_p99:.3f} s is "
                    f"outside the engine histogram's bucket [{check.engine_low:g}, {check.engine_high:g}] s."
                )
    parts += ["", "Throughput (output tokens/s) @ mean running batch; * marks a step that missed.", ""]
    parts.append(markdown_table(batch_matrix(runs)))
    return "\n".join(parts) + "\n"


def capacity_html(runs: Sequence[CapacityRun], title: str = "Capacity", extra: Sequence[Chart] = ()) -> str:
    """One self-contained HTML page: tables and inline SVG charts, no scripts or external files."""
    charts = [latency_chart(runs), goodput_chart(runs), batch_chart(runs), *extra]
    slos = ", ".join(slo.label for slo in runs[0].plan.slos)
    body = [
        f"<h1>{escape(title)}</h1>",
        f"<p>SLOs: {escape(slos)}. The shaded band is each knee's interval.</p>",
        html_table(summary_rows(runs)),
        '<div class="charts">',
        *(render(chart) for chart in charts),
        "</div>",
        "<h2>Batching efficiency</h2>",
        "<p>Output tokens/s @ mean running batch; * marks a step that missed.</p>",
        html_table(batch_matrix(runs)),
    ]
    head = f'<meta charset="utf-8"><title>{escape(title)}</title><style>{STYLE}</style>'
    return f"<!doctype html>\n<html><head>{head}</head><body>\n" + "\n".join(body) + "\n</body></html>\n"
