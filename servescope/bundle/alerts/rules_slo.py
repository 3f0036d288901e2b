"""Latency SLO as a ratio SLI, alerted on by multi-window, multi-burn-rate rules.

Google's SRE workbook windows for a 30-day budget: page when 1h and 5m both burn faster than 14.4x, or
6h and 30m faster than 6x; ticket when 1d and 2h burn faster than 3x, or 3d and 6h faster than 1x.
"""

from __future__ import annotations

from servescope.bundle.alerts.buckets import below
from servescope.bundle.alerts.model import Alert, Group, Record
from servescope.core import catalog as c
from servescope.core.config import AlertsConfig
from servescope.core.topology import sel

SERIES_BY = "job, instance, model_name, engine, endpoint"

WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
# Windows derived in the long group, evaluated less often: a ratio over hours moves little in 5 min.
LONG_WINDOWS = ("2h", "6h", "1d", "3d")
LONG_INTERVAL = "5m"
# The alerts read a long window's last record within this range: robust to a late long-group evaluation
# (an instant query sees a sample for 5 min only, the long group's very interval).
LONG_LOOKBACK = "10m"
PAGE = ((14.4, "1h", "5m"), (6.0, "6h", "30m"))
TICKET = ((3.0, "1d", "2h"), (1.0, "3d", "6h"))
SLIS = {
    "ttft": (c.TTFT.name, "Ttft", "time to first token"),
    "e2e": (c.E2E.name, "E2e", "end-to-end latency"),
}


def error_ratio(sli: str, window: str) -> str:
    """Recording rule name: share of requests slower than the bound over the window, per model."""
    return f"model:servescope_{sli}_slo_errors:ratio_rate{window}"


def good_rate(sli: str) -> str:
    """Recording rule name: requests under the bound per second over 5 min, per model."""
    return f"model:servescope_{sli}_slo_good:rate5m"


def requests_rate(sli: str) -> str:
    """Recording rule name: requests per second over 5 min, per model, of the histograms with the bound."""
    return f"model:servescope_{sli}_slo_requests:rate5m"


def _ratio(cfg: AlertsConfig, sli: str, window: str) -> str:
    """The error ratio of a window, from its last record: a scrape gap leaves no record (its rates lack
    samples), and a page must neither resolve nor fire again for that; a new record (recovery) counts."""
    lookback = LONG_LOOKBACK if window in LONG_WINDOWS else cfg.page_gap_tolerance
    return f"last_over_time({error_ratio(sli, window)}[{lookback}])"


def burn(cfg: AlertsConfig, sli: str, pairs: tuple[tuple[float, str, str], ...] = PAGE) -> str:
    """Models whose error ratio of `sli` burns the budget faster than a pair's factor over both of its
    windows (the value is the long window's ratio)."""
    budget = cfg.error_budget
    return " or ".join(
        f"({_ratio(cfg, sli, long)} > {factor:g} * {budget:g} and {_ratio(cfg, sli, short)} > {factor:g} * "
        f"{budget:g})"
        for factor, long, short in pairs
    )


def _derived(sli: str, window: str) -> Record:
    """A window's error ratio from the 5 min rates: each 5 min rate is taken once, not once per window."""
    good, requests = good_rate(sli), requests_rate(sli)
    return Record(
        error_ratio(sli, window),
        f"1 - sum_over_time({good}[{window}]) / sum_over_time({requests}[{window}])",
    )


def good_per_series(cfg: AlertsConfig, metric: str, bound: str) -> str:
    """Each histogram's requests under `bound` per second: its bucket at the bound, else its nearest lower
    bucket (the greatest cumulative count among the buckets below: counts never fall as `le` grows).

    The nearest lower bucket undercounts the good requests by those between it and the bound, so the error
    ratio is overestimated by their share (buckets 0.25 and 1.0 against a 0.5 s bound count every request
    of 0.25-0.5 s as a miss): a real burn still pages; ServescopeSloBucketMissing says precision is lost.
    """
    exact = sel(cfg, f"{metric}_bucket", f'le="{bound}"')
    lower = sel(cfg, f"{metric}_bucket", f'le=~"{below(bound)}"')
    return f"(rate({exact}[5m]) or on ({SERIES_BY}) max by ({SERIES_BY}) (rate({lower}[5m])))"


def records(cfg: AlertsConfig) -> Group:
    """5 min rates per model and the short windows' error ratios.

    The requests counted are those of the histograms with a bucket at or below the bound: an engine with
    none (its first bucket above the bound) would add its requests to the total and none to the good ones,
    and read as all slow.
    """
    rules = []
    for sli, (metric, _, _) in SLIS.items():
        good = good_per_series(cfg, metric, cfg.slo_bound(sli))
        total = sel(cfg, f"{metric}_count")
        rules += [
            Record(good_rate(sli), f"sum by (model_name) ({good})"),
            Record(
                requests_rate(sli),
                f"sum by (model_name) (rate({total}[5m]) and on ({SERIES_BY}) {good})",
            ),
            Record(error_ratio(sli, "5m"), f"1 - {good_rate(sli)} / {requests_rate(sli)}"),
            *(_derived(sli, w) for w in WINDOWS[1:] if w not in LONG_WINDOWS),
        ]
    return Group("servescope-slo-records", tuple(rules))


def long_records(cfg: AlertsConfig) -> Group:
    """The long windows' error ratios, every LONG_INTERVAL."""
    rules = [_derived(sli, w) for sli in SLIS for w in LONG_WINDOWS]
    return Group("servescope-slo-records-long", tuple(rules), interval=LONG_INTERVAL)


def bucket_missing(cfg: AlertsConfig) -> Alert:
    """Engines whose latency histogram has no bucket at an SLI's bound: their requests are not judged."""
    branches = []
    for sli, (metric, _, _) in SLIS.items():
        bound = sel(cfg, f"{metric}_bucket", f'le="{cfg.slo_bound(sli)}"')
        has_bound = f"present_over_time({bound}[1h])"
        missing = (
            f"group by ({SERIES_BY}) (present_over_time({sel(cfg, f'{metric}_count')}[5m]))"
            f" unless on ({SERIES_BY}) {has_bound}"
        )
        branches.append(f'label_replace({missing}, "sli", "{sli}", "", "")')
    bounds = ", ".join(f"{words} {cfg.slo_bound(sli)} s" for sli, (_, _, words) in SLIS.items())
    return Alert(
        "ServescopeSloBucketMissing",
        " or ".join(branches),
        cfg.slo_bucket_missing_for,
        "warning",
        "An engine's latency histogram has no bucket at the SLO bound: its requests are judged roughly.",
        "{{ $labels.model_name }} engine {{ $labels.engine }} at {{ $labels.endpoint }}: its "
        f"{{{{ $labels.sli }}}} histogram has no bucket at the SLO bound ({bounds}), so the SLO alerts "
        "count its requests from its nearest lower bucket (those between it and the bound count as misses: "
        "the burn is overestimated), or leave them out if it has none; set the bound to one of its buckets, "
        "or configure the engine's buckets.",
        ("instance", "model_name", "engine", "endpoint", "sli"),
        "slo",
    )


def p99(buckets: str) -> str:
    """Each model's P99 from `buckets`, right whatever bucket layouts its endpoints have.

    Summing histograms of different layouts (vLLM's TTFT buckets have 0.5, SGLang's jump from 0.4 to
    0.6) interleaves bounds only some endpoints count under, and the quantile read off that sum is wrong
    (every request fast reads as ~1 s). A model whose endpoints all have the same bounds (as many distinct
    `le` as each endpoint's own count) gets the P99 of their sum; any other model the P99 of its slowest
    endpoint, each computed within its own layout.
    """
    rates = f"rate({buckets}[5m])"
    per_endpoint = f"count by ({SERIES_BY}) ({rates})"
    uniform = (
        f"count by (model_name) (count by (model_name, le) ({rates}))"
        f" == on (model_name) min by (model_name) ({per_endpoint})"
    )
    pooled = f"histogram_quantile(0.99, sum by (le, model_name) (rate({buckets}[5m])))"
    slowest = (
        f"max by (model_name) (histogram_quantile(0.99, sum by (le, {SERIES_BY}) (rate({buckets}[5m]))))"
    )
    return f"(({pooled} and on (model_name) ({uniform})) or ({slowest} unless on (model_name) ({uniform})))"


def alerts(cfg: AlertsConfig) -> Group:
    # One declarative list of the SLO alerts, read top to bottom as the bundle's reference: longer than 40
    # lines on purpose.
    rules: list[Alert] = []
    for sli, (_, title, words) in SLIS.items():
        objective = f"{cfg.slo_objective:.2%} of requests under {cfg.slo_bound(sli)} s"
        rules += [
            Alert(
                f"Servescope{title}SloBurnFast",
                burn(cfg, sli, PAGE),
                cfg.slo_fast_for,
                "critical",
                f"The {words} SLO's error budget burns fast.",
                f"{{{{ $labels.model_name }}}}: {{{{ $value | humanizePercentage }}}} of requests miss "
                f"the {words} "
                f"objective ({objective}); at this rate the 30-day budget is gone in under 5 days.",
                ("model_name",),
                "slo",
                keep_firing_for=cfg.slo_fast_keep_firing_for,
            ),
            Alert(
                f"Servescope{title}SloBurnSlow",
                burn(cfg, sli, TICKET),
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
            f"{p99(sel(cfg, metric + '_bucket'))} > {cfg.p99_threshold_seconds:g}",
            cfg.p99_for,
            "warning",
            f"P99 {words} is over its threshold.",
            f"{{{{ $labels.model_name }}}}: P99 {words} is {{{{ $value | humanizeDuration }}}} "
            f"(threshold {cfg.p99_threshold_seconds:g} s).",
            ("model_name",),
            "slo",
        )
    )
    rules.append(bucket_missing(cfg))
    return Group("servescope-slo", tuple(rules))
