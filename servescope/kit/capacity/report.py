"""Capacity reports readable without Grafana: Markdown, and self-contained HTML with inline SVG charts
(templates/capacity.html, in the page shell of core/html.py: every run label, target and model name
reaches the page escaped)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from servescope.core.html import Markup, document, render
from servescope.core.svg import Chart, Series, hline
from servescope.core.svg import render as render_chart
from servescope.kit.capacity.result import CapacityRun, save

TEMPLATES = "servescope.kit.capacity"

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
    return run.plan.slos[0].key


def latency_chart(runs: Sequence[CapacityRun]) -> Chart:
    """Offered rate against the first SLO's percentile, with the SLO line and each knee's interval."""
    slo = runs[0].plan.slos[0]
    chart = Chart(
        f"Offered rate vs {slo.metric} p{slo.quantile * 100:g}",
        "offered (requests/s)",
        "seconds",
        lines=[hline(slo.limit_s, f"SLO {slo.limit_s * 1000:g} ms")],
        y_cap=slo.limit_s * 4,
    )
    for run in runs:
        chart.series.append(Series(run.label, _by_rate(run, slo_key(run))))
        if run.knee.status == "measured" and math.isfinite(run.knee.upper):
            chart.vbands.append((run.knee.lower, run.knee.upper, f"{run.label} knee interval"))
    return chart


def goodput_chart(runs: Sequence[CapacityRun]) -> Chart:
    chart = Chart("Goodput (requests/s meeting every SLO)", "offered (requests/s)", "goodput (requests/s)")
    chart.series = [Series(run.label, _by_rate(run, "goodput")) for run in runs]
    return chart


def batch_chart(runs: Sequence[CapacityRun]) -> Chart:
    chart = Chart("Throughput vs running batch", "mean running batch", "output tokens/s", join=False)
    for run in runs:
        points = [(s.mean_running, s.throughput_tokens) for s in run.steps if math.isfinite(s.mean_running)]
        chart.series.append(Series(run.label, points))
    return chart


def knee_cells(run: CapacityRun) -> tuple[str, str]:
    """The knee and its interval as a table shows them; a run without a knee says why instead."""
    k = run.knee
    upper = "inf" if math.isinf(k.upper) else f"{k.upper:.2f}"
    interval = f"[{k.lower:.2f}, {upper}]"
    if k.estimate is None:
        above = "" if k.client_bound_above is None else f" above {k.client_bound_above:g}"
        return f"{k.status}{above}", interval
    note = " (pruned)" if k.pruned else ""
    return f"{k.estimate:.2f}{note}", interval


def summary_rows(runs: Sequence[CapacityRun]) -> list[list[str]]:
    """Header and one row per run: knee, interval, sizing, cross-check."""
    rows = [["configuration", "knee req/s", "interval", "replicas (GPUs) for peak", "client vs engine TTFT"]]
    for run in runs:
        sizing = "-" if run.provision is None else f"{run.provision.replicas} ({run.provision.gpus})"
        disagree = sum(1 for c in run.cross_checks if not c.agrees)
        check = (
            "-"
            if not run.cross_checks
            else f"{len(run.cross_checks) - disagree}/{len(run.cross_checks)} agree"
        )
        rows.append([run.label, *knee_cells(run), sizing, check])
    return rows


def _seconds(value: float) -> str:
    return "inf" if math.isinf(value) else ("-inf" if value == -math.inf else f"{value:.3g}")


def step_rows(run: CapacityRun) -> list[list[str]]:
    """Every step: its verdict, the first SLO's quantile with its interval, throughput against the
    engine's own count, the client's lag and CPU."""
    key = slo_key(run)
    rows = [
        [
            "req/s",
            "seed",
            "verdict",
            f"{key} s [interval]",
            "requests",
            "seconds",
            "tokens/s (engine)",
            "lag p99 ms",
            "client ms/req",
        ]
    ]
    for s in run.steps:
        low, high = s.intervals.get(key, (-math.inf, math.inf))
        engine = "-" if s.engine_tokens is None else f"{s.engine_tokens:.0f}"
        cpu = "-" if s.client_cpu_ms is None else f"{s.client_cpu_ms:.2f}"
        verdict = s.verdict if s.status == "valid" else f"{s.verdict} ({s.status})"
        rows.append(
            [
                f"{s.offered:g}",
                str(s.seed),
                verdict,
                f"{_seconds(s.percentiles.get(key, math.nan))} [{_seconds(low)}, {_seconds(high)}]",
                str(s.requests),
                f"{s.duration_s:.0f}",
                f"{s.throughput_tokens:.0f} ({engine})",
                f"{s.lag_p99_s * 1000:.0f}",
                cpu,
            ]
        )
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


def provenance_line(run: CapacityRun) -> str:
    p = run.provenance
    workload = ", ".join(f"{k} {v}" for k, v in p.workload.items()) or "-"
    return (
        f"{run.label}: {p.runner} runner against {p.target} (model {p.model or '-'}, engine "
        f"{p.engine_version}), started {p.started or '-'} on {p.host}, servescope {p.servescope_version}; "
        f"workload: {workload}" + (f"; {p.calibration}" if p.calibration else "")
    )


def capacity_markdown(runs: Sequence[CapacityRun], title: str = "Capacity") -> str:
    """The runs as Markdown: a single run's status first, SLOs, knee table, sizing, each run's steps and
    provenance, the batching matrix, cross-check disagreements."""
    slos = ", ".join(slo.label for slo in runs[0].plan.slos)
    head = [f"{runs[0].status_line}", ""] if len(runs) == 1 else []
    parts = [*head, f"# {title}", "", f"SLOs: {slos}.", "", markdown_table(summary_rows(runs)), ""]
    for run in runs:
        parts.append(f"- {provenance_line(run)}")
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
    for run in runs:
        parts += ["", f"Steps of {run.label} (tokens/s over the time the requests took):", ""]
        parts.append(markdown_table(step_rows(run)))
    parts += ["", "Throughput (output tokens/s) @ mean running batch; * marks a step that missed.", ""]
    parts.append(markdown_table(batch_matrix(runs)))
    return "\n".join(parts) + "\n"


def capacity_html(
    runs: Sequence[CapacityRun],
    title: str = "Capacity",
    extra: Sequence[Chart] = (),
    *,
    tables: Sequence[tuple[str, Sequence[Sequence[str]]]] = (),
    lead: Sequence[str] = (),
) -> str:
    """One self-contained HTML page: tables and inline SVG charts, no scripts or external files; `lead`
    sentences and `tables` (title, rows) come first (a tuning study's)."""
    charts = [latency_chart(runs), goodput_chart(runs), batch_chart(runs), *extra]
    body = render(
        TEMPLATES,
        "capacity.html",
        status=runs[0].status_line if len(runs) == 1 else "",
        title=title,
        lead=lead,
        tables=tables,
        slos=", ".join(slo.label for slo in runs[0].plan.slos),
        summary=summary_rows(runs),
        provenance=[provenance_line(run) for run in runs],
        charts=[Markup(render_chart(chart)) for chart in charts],
        steps=[(run.label, step_rows(run)) for run in runs],
        matrix=batch_matrix(runs),
    )
    return f"{document(title, body, style=STYLE)}\n"


def write_reports(runs: list[CapacityRun], out: Path, title: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "capacity.md").write_text(capacity_markdown(runs, title), encoding="utf-8")
    (out / "capacity.html").write_text(capacity_html(runs, title), encoding="utf-8")
    save(runs[0], out / "capacity.json")
