"""The report's sections: one Markdown table per benchmark, servescope beside its baseline or reference."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report_targets import MIB, STEADY_AFTER, figure, scrape_rows, shown


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _scrape_row(r: dict[str, Any]) -> list[str]:
    ours, base = r["servescope"], r["generate_latest"]
    engines = str(r["engines_requested"])
    if r["engines_running"] != r["engines_requested"]:
        engines += f" (ran {r['engines_running']})"
    return [
        str(r["gpus"]),
        engines,
        f"{r['series']:,}",
        f"{ours['p50_ms']:.2f} / {ours['p99_ms']:.2f}",
        f"{ours['per_second']:,.0f}",
        f"{r['servescope_us_per_line']:.3f}",
        f"{base['p50_ms']:.1f}",
        f"**{r['p50_ratio']:.0f}x**",
    ]


def scrape_section(scrape: dict[str, Any]) -> list[str]:
    rows = [_scrape_row(r) for r in scrape_rows(scrape)]
    header = ["GPUs", "engines", "series", "servescope p50 / p99 ms", "scrapes/s", "µs/line"]
    header += ["generate_latest p50 ms", "ratio (p50)"]
    lines = [
        "## Scrape",
        "",
        "`/metrics` of `servescope serve --simulate` (18 NVLinks per GPU, DCGM streaming, engines' series "
        "passed through), the exporter and its stand-ins on one core and the client on the other, against "
        "the same bytes rendered per request by prometheus_client's `generate_latest`. An engine needs a "
        'GPU, so engines are capped at the GPU count ("ran" shows the cap).',
        "",
        *table(header, rows),
        "",
        node_exporter_line(scrape),
        "",
    ]
    unsettled = [
        f"{r['gpus']} GPUs x {r['engines_requested']} engines"
        for r in scrape_rows(scrape)
        if not r["settled"]
    ]
    if unsettled:
        # Timed before every engine joined or DCGM came up: a smaller exposition than the cell's.
        lines += [f"**Not settled when timed:** {', '.join(unsettled)}.", ""]
    return lines


def node_exporter_line(scrape: dict[str, Any]) -> str:
    ref = scrape.get("node_exporter") or {}
    if not ref.get("installed"):
        return (
            "Reference: prometheus-node-exporter not installed (`apt-get install prometheus-node-exporter`)."
        )
    if "us_per_line" not in ref:
        return f"Reference: prometheus-node-exporter {ref.get('error', 'did not run')}."
    ours = [r["servescope_us_per_line"] for r in scrape_rows(scrape)]
    span = f"{min(ours):.3f} to {max(ours):.3f}" if ours else "—"
    return (
        f"Reference on this machine: node_exporter with its default collectors serves {ref['series']:,} "
        f"lines at p50 {ref['timing']['p50_ms']:.2f} ms, **{ref['us_per_line']:.3f} µs per line**; "
        f"servescope {span} µs per line across the cells above."
    )


def ingest_section(ingest: dict[str, Any]) -> list[str]:
    rows = [
        [
            name,
            f"{r['lines']:,.0f}",
            f"{r['prometheus_client_us_per_line']:.2f}",
            f"{r['cold_us_per_line']:.2f}",
            f"{r['warm_us_per_line']:.2f}",
            f"{r['speedup_cold']:.1f}x",
            f"**{r['speedup_warm']:.1f}x**",
        ]
        for name, r in ingest.get("inputs", {}).items()
    ]
    header = ["input", "lines", "prometheus_client µs/line", "servescope first scrape", "later scrapes"]
    header += ["ratio first", "ratio later"]
    skipped = ingest.get("skipped") or []
    lines = [
        "## Ingestion",
        "",
        f"µs per line, best of {ingest.get('runs')} runs; every captured exposition (tests/fixtures/samples) "
        "and a synthetic 16-engine vLLM exposition.",
        "",
        *table(header, rows),
        "",
    ]
    if skipped:
        lines += [f"Not expositions, so not parsed: {', '.join(skipped)}.", ""]
    return lines


def dcgm_section(dcgm: dict[str, Any]) -> list[str]:
    rates = dcgm.get("parser_rows_per_second", {})
    sup = dcgm.get("supervisor", {})
    rows = [[f"DCGM {layout}", f"{rate:,.0f}"] for layout, rate in rates.items()]
    return [
        "## DCGM",
        "",
        *table(["dmon layout", "parser rows/s"], rows),
        "",
        f"Supervisor, reader threads and one collect per second while the fake dcgmi streams 8 GPUs x 20 "
        f"fields: {sup.get('cpu_percent', float('nan')):.2f} % of one core.",
        "",
    ]


def derived_section(derived: dict[str, Any]) -> list[str]:
    return [
        "## Derived signals",
        "",
        *table(
            ["cycle (8 GPUs + 8 processes + 4 engines, 1 h history)", "median"],
            [
                ["with every trend and leak verdict refit", f"{derived.get('cycle_with_refit_ms')} ms"],
                ["peaks, exhaustion, KV, advice only", f"{derived.get('cycle_cached_ms')} ms"],
                ["CPU at the defaults", f"{derived.get('cpu_share_at_defaults_percent')} % of a core"],
                ["sample rings held", f"{derived.get('history_bytes', 0) / MIB:.2f} MiB"],
            ],
        ),
        "",
    ]


def footprint_section(fp: dict[str, Any]) -> list[str]:
    stand_ins = ", ".join(
        f"{kind} {share:.2f} %"
        for kind, share in sorted(fp.get("children_cpu_percent_of_one_core", {}).items())
    )
    rows = [
        [
            "CPU, share of one core",
            f"{fp['cpu_percent_of_one_core']:.2f} % ({fp.get('cpu_percent_of_one_core_after_2min', 0):.2f} % "
            "after minute 2)",
            "131 % (dcgm-exporter#311)",
        ],
        [
            "RSS",
            f"{fp['rss_mib_max']:.1f} MiB max, {fp['rss_slope_mib_per_min_after_2min'] * 1024:+.1f} KiB/min "
            "after minute 2",
            "grows to 512 MiB, OOM-killed (dcgm-exporter#702, pytorch/ci-infra#1011)",
        ],
    ]
    lines = [
        "## Footprint",
        "",
        f"`servescope serve --simulate --gpus {fp.get('gpus')} --engines {fp.get('engines')}` at the default "
        f"intervals with the fake dcgmi streaming ({fp.get('dcgm_series_last_scrape')} DCGM series), "
        f"scraped every 15 s for {fp.get('minutes'):g} min. dcgm-exporter's figures are as reported by "
        "its users in the issues cited, not measured here.",
        "",
        *table(["", "servescope (measured here)", "dcgm-exporter (reported by users)"], rows),
        "",
        f"Stand-ins for vLLM and the GPU, not counted above: {stand_ins or 'none'} of one core.",
        "",
    ]
    if not fp.get("dcgm_series_last_scrape"):
        lines += ["**No DCGM series in the last scrape: the fake dcgmi was not streaming.**", ""]
    if fp.get("rss_slope_from_seconds", STEADY_AFTER) < STEADY_AFTER:
        lines += ["The soak was shorter than 2 minutes: the slope includes start-up allocation.", ""]
    return lines


def memory_section(m: dict[str, Any]) -> list[str]:
    drops = ", ".join(f"{k} {v:,.0f}" for k, v in sorted(m.get("dropped", {}).items())) or "none"
    return [
        "## Memory under hostile inputs",
        "",
        f"The exporter with the DaemonSet's settings, {m.get('engines')} engines answering 4 MiB pages of "
        f"fresh high-cardinality series at every scrape and a dcgmi streaming {m.get('dcgm_entities', 0):,} "
        f"entities, for {m.get('seconds', 0):g} s: peak RSS {m.get('peak_rss_mib')} MiB "
        f"({m.get('peak_share_of_limit', 0):.0%} of the {m.get('limit_mib', 0):g} Mi limit), "
        f"{m.get('series_at_end', 0):,} series in /metrics at the end. Dropped and counted: {drops}.",
        "",
    ]


def freshness_section(fp: dict[str, Any]) -> list[str]:
    intervals = {"nvml": "1 s", "dcgm": "1 s", "vllm": "5 s", "derived": "5 s"}
    rows = [
        [
            source,
            intervals.get(source, "?"),
            f"{f['p50_seconds']:.2f} s",
            f"{f['max_seconds']:.2f} s",
            f"{f['stalest_max_seconds']:.2f} s" if source == "vllm" else "",
            "30 s default collection interval" if source in ("nvml", "dcgm") else "",
        ]
        for source, f in fp.get("freshness", {}).items()
    ]
    header = ["source", "interval", "age p50", "age max", "stalest engine max", "dcgm-exporter"]
    return [
        "## Freshness",
        "",
        "Age of each source's newest value when a scrape is answered: the scrape's wall time minus "
        "`servescope_source_last_success_timestamp_seconds` (per engine for vLLM), over the footprint soak. "
        "dcgm-exporter collects every 30 s by default while ServiceMonitors scrape every 15 s, so its values "
        "are up to ~40 s stale (shared reference, dcgm.md).",
        "",
        *table(header, rows),
        "",
    ]


def first_table(markdown: str) -> list[str]:
    """The first Markdown table of a document: its summary."""
    lines: list[str] = []
    for line in markdown.splitlines():
        if line.lstrip().startswith("|"):
            lines.append(line.strip())
        elif lines:
            break
    return lines


def alert_section(alerts: dict[str, Any], results: Path) -> list[str]:
    """alert_quality.py's own summary table; its headline figures when it wrote no Markdown table."""
    md = results / "alert-quality.md"
    summary = first_table(md.read_text()) if md.exists() else []
    if not summary:
        figures = [
            ("precision", figure(alerts, "precision")),
            ("recall", figure(alerts, "recall")),
            ("leak alert lead, minutes", figure(alerts, "leak_lead_minutes")),
        ]
        summary = table(["measure", "value"], [[name, shown(v, lambda x: f"{x:g}")] for name, v in figures])
    return ["## Alert quality", "", *summary, "", "Details: `alert-quality.md`.", ""]
