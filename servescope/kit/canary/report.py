"""An analysis for programs (JSON), for people in a terminal, and as Markdown (tickets, pull requests)."""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from typing import Any

from servescope.kit.canary.analysis import Analysis
from servescope.kit.canary.judge import Distribution, SliResult

LATENCIES = ("ttft", "itl", "e2e")


def when(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def _clean(value: Any) -> Any:
    """JSON has no NaN or infinity: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def to_json(analysis: Analysis) -> dict[str, Any]:
    """The analysis as JSON: each SLI flat (name, title, test, why, verdict, reason, both revisions'
    figures, effect, distribution)."""
    data = asdict(analysis)
    data["slis"] = [
        {**asdict(r.sli), **{k: v for k, v in asdict(r).items() if k != "sli"}} for r in analysis.slis
    ]
    data |= {
        "exit_code": analysis.exit_code,
        "canary_share": analysis.canary_share,
        "time": when(analysis.at),
    }
    return dict(_clean(data))


def figure(result: SliResult, side: dict[str, float]) -> str:
    """The figure a person compares: P99 and requests, a share of n, a rate per request."""
    if not side:
        return "-"
    if result.name in LATENCIES:
        return f"P99 {_seconds(side.get('p99', math.nan))}, {side.get('requests', 0):,.0f} requests"
    if "share" in side:
        return f"{_percent(side['share'])} of {side.get('requests', 0):,.0f}"
    if "per_request" in side:
        return f"{side['events']:,.0f} ({side['per_request']:.3g}/request)"
    return "-"


HEAD = ("SLI", "verdict", "canary", "stable", "effect", "p", "test", "because")


def table(analysis: Analysis) -> list[list[str]]:
    """One row of HEAD's cells per SLI: the table both reports show."""
    rows = []
    for r in analysis.slis:
        effect = f"{r.effect.name} {_number(r.effect.size)}" if r.effect else "-"
        p_value = _number(r.effect.p_value) if r.effect else "-"
        rows.append(
            [
                r.title,
                r.verdict,
                figure(r, r.canary),
                figure(r, r.stable),
                effect,
                p_value,
                r.sli.test,
                r.reason,
            ]
        )
    return rows


def shares(found: Distribution) -> list[tuple[str, str, str]]:
    """Per bucket: its bound, and the share of each revision's observations in it."""
    total_c, total_s = sum(found.canary) or 1.0, sum(found.stable) or 1.0
    return [
        (bound_label(b), _percent(c / total_c), _percent(s / total_s))
        for b, c, s in zip(found.bounds, found.canary, found.stable, strict=True)
    ]


def _seconds(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _percent(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.2%}"


def _number(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.3g}"


def _traffic(analysis: Analysis) -> str:
    total = sum(analysis.traffic.values()) or 1.0
    parts = [
        f"{revision} {requests:,.0f} ({requests / total:.1%})"
        for revision, requests in sorted(analysis.traffic.items(), key=lambda item: -item[1])
    ]
    return ", ".join(parts) or "no requests"


def headline(analysis: Analysis) -> str:
    stable = analysis.stable or "(none)"
    return (
        f"{analysis.model}: revision {analysis.canary} against {stable}, {analysis.window} to "
        f"{when(analysis.at)}: {analysis.verdict.upper()} ({analysis.reason})"
    )


def text(analysis: Analysis) -> str:
    """The terminal's summary: the verdict, then one line per SLI."""
    lines = [headline(analysis), f"  traffic: {_traffic(analysis)}"]
    for result in analysis.slis:
        lines.append(
            f"  {result.verdict:<12} {result.title:<28} canary {figure(result, result.canary)}; "
            f"stable {figure(result, result.stable)}; {result.reason}"
        )
    return "\n".join(lines) + "\n"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def markdown(analysis: Analysis) -> str:
    """The whole analysis: verdict, SLIs, both distributions per latency, traffic, the tests and why."""
    lines = [
        f"# Canary analysis: {analysis.verdict}",
        "",
        headline(analysis),
        "",
        f"- Traffic over the window: {_traffic(analysis)}.",
        f"- Alpha {analysis.alpha:g} over every test (Bonferroni): {analysis.alpha_each:.3g} each.",
        f"- Exit code {analysis.exit_code} (0 promote, 1 rollback, 2 inconclusive).",
        "",
        _row(list(HEAD)),
        _row(["---"] * len(HEAD)),
        *(_row(row) for row in table(analysis)),
    ]
    lines += ["", "KV-cache usage (reported, not judged: it follows each revision's own load): "]
    lines[-1] += ", ".join(
        f"{rev} {_percent(use) if use is not None else '-'}" for rev, use in analysis.kv_usage.items()
    )
    lines += _distributions(analysis) + _buckets(analysis) + ["", "## The tests", ""]
    lines += [f"- **{r.title}**: {r.sli.test}. {r.sli.why}" for r in analysis.slis]
    return "\n".join(lines) + "\n"


def bound_label(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else f"<= {bound:g} s"


def _distributions(analysis: Analysis) -> list[str]:
    lines: list[str] = []
    for r in analysis.slis:
        if r.distribution is not None:
            lines += ["", f"## {r.title}: both distributions", "", _row(["bucket", "canary", "stable"])]
            lines += [_row(["---"] * 3), *(_row(list(row)) for row in shares(r.distribution))]
    return lines


def _buckets(analysis: Analysis) -> list[str]:
    lines = ["", "## Traffic per user bucket", ""]
    if not analysis.buckets:
        return [
            *lines,
            "No per-bucket series: run `servescope load --user-id-header NAME --metrics-port PORT` and let "
            "Prometheus scrape it (add `--revision-header` to see which revision answered each bucket).",
        ]
    lines += [_row(["user bucket", "revision that answered", "requests"]), _row(["---"] * 3)]
    lines += [_row([b.bucket, b.revision or "(not named)", f"{b.requests:,.0f}"]) for b in analysis.buckets]
    return lines
