"""Latency SLO as a ratio SLI, alerted on by multi-window, multi-burn-rate rules.

Google's SRE workbook windows for a 30-day budget: page when 1h and 5m both burn faster than 14.4x, or
6h and 30m faster than 6x; ticket when 1d and 2h burn faster than 3x, or 3d and 6h faster than 1x.
"""

from __future__ import annotations

from servescope import catalog as c
from servescope.alerts.config import AlertsConfig
from servescope.alerts.model import Alert, Group, Record, sel

WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
PAGE = ((14.4, "1h", "5m"), (6.0, "6h", "30m"))
TICKET = ((3.0, "1d", "2h"), (1.0, "3d", "6h"))
SLIS = {
    "ttft": (c.TTFT.name, "Ttft", "time to first token"),
    "e2e": (c.E2E.name, "E2e", "end-to-end latency"),
}


def error_ratio(sli: str, window: str) -> str:
    """Recording rule name: share of requests slower than the bound over the window, per model."""
    return f"model:servescope_{sli}_slo_errors:ratio_rate{window}"


def _burn(cfg: AlertsConfig, sli: str, pairs: tuple[tuple[float, str, str], ...]) -> str:
    budget = cfg.error_budget
    return " or ".join(
        f"({error_ratio(sli, long)} > {factor:g} * {budget:g} and {error_ratio(sli, short)} > "
        f"{factor:g} * {budget:g})"
        for factor, long, short in pairs
    )


def records(cfg: AlertsConfig) -> Group:
    rules = []
    for sli, (metric, _, _) in SLIS.items():
        good = sel(cfg, f"{metric}_bucket", f'le="{cfg.slo_bound(sli)}"')
        total = sel(cfg, f"{metric}_count")
        for window in WINDOWS:
            rules.append(
                Record(
                    error_ratio(sli, window),
                    f"1 - (sum by (model_name) (rate({good}[{window}]))"
                    f" / sum by (model_name) (rate({total}[{window}])))",
                )
            )
    return Group("servescope-slo-records", tuple(rules))


def alerts(cfg: AlertsConfig) -> Group:
    # One declarative list of the SLO alerts, read top to bottom as the bundle's reference: longer than 40
    # lines on purpose.
    rules: list[Alert] = []
    for sli, (_, title, words) in SLIS.items():
        objective = f"{cfg.slo_objective:.2%} of requests under {cfg.slo_bound(sli)} s"
        rules += [
            Alert(
                f"Servescope{title}SloBurnFast",
                _burn(cfg, sli, PAGE),
                cfg.slo_fast_for,
                "critical",
                f"The {words} SLO's error budget burns fast.",
                f"{{{{ $labels.model_name }}}}: {{{{ $value | humanizePercentage }}}} of requests miss "
                f"the {words} "
                f"objective ({objective}); at this rate the 30-day budget is gone in under 5 days.",
                ("model_name",),
                "slo",
            ),
            Alert(
                f"Servescope{title}SloBurnSlow",
                _burn(cfg, sli, TICKET),
                cfg.slo_slow_for,
                "warning",
                f"The {words} SLO's error budget burns faster than it refills.",
                f"{{{{ $labels.model_name }}}}: {{{{ $value | humanizePercentage }}}} of requests miss "
                f"the {words} "
                f"objective ({objective}) over days: the budget will not last the month.",
                ("model_name",),
                "slo",
            ),
        ]
    metric, title, words = {
        "ttft": (c.TTFT.name, "Ttft", "time to first token"),
        "itl": (c.ITL.name, "Itl", "inter-token latency"),
        "e2e": (c.E2E.name, "E2e", "end-to-end latency"),
    }[cfg.p99_histogram]
    rules.append(
        Alert(
            f"Servescope{title}P99High",
            f"histogram_quantile(0.99, sum by (le, model_name) (rate({sel(cfg, metric + '_bucket')}[5m])))"
            f" > {cfg.p99_threshold_seconds:g}",
            cfg.p99_for,
            "warning",
            f"P99 {words} is over its threshold.",
            f"{{{{ $labels.model_name }}}}: P99 {words} is {{{{ $value | humanizeDuration }}}} "
            f"(threshold {cfg.p99_threshold_seconds:g} s).",
            ("model_name",),
            "slo",
        )
    )
    return Group("servescope-slo", tuple(rules))
