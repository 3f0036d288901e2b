"""Per-revision SLO records, and the alerts for a canary revision worse than the stable one.

Every serving series carries the pod's rollout `revision` (servescope.core.catalog.revision). The records
below are the bundle's SLIs per model and revision; the alerts compare each revision of a model with the
one serving most of its requests (the stable), over `canary.window`, once both served
`canary.min_requests`: fewer is not enough data, and no alert. A regression of every revision alike
changes no comparison: it is the model's SLO page, never a canary alert.
"""

from __future__ import annotations

from servescope.bundle.alerts.model import Alert, Group, Record
from servescope.bundle.alerts.rules_slo import PAGE, SERIES_BY, SLIS
from servescope.core import catalog as c
from servescope.core.canary_exprs import (
    BY,
    ERROR_RATIO,
    FAILED,
    FAILED_REASONS,
    FINISHED,
    KV_USAGE,
    LATENCIES,
    PREEMPTIONS,
    SLO_SLIS,
    Pair,
    Side,
    record,
)
from servescope.core.config import AlertsConfig
from servescope.core.topology import sel

HISTOGRAMS = {"ttft": c.TTFT.name, "itl": c.ITL.name}
KEYS = ("model_name", "revision", "stable_revision", "sli")
WORSE = "ServescopeCanaryWorseThanStable"
BURN = "ServescopeCanarySloBurn"


def stable(cfg: AlertsConfig) -> str:
    """Record: the revision with most requests of each model over the canary window, the stable one."""
    return record("ttft_slo_requests", f"stable_increase{cfg.canary.window}")


def comparisons(cfg: AlertsConfig) -> dict[str, tuple[str, float]]:
    """The alert's `sli` label -> the record comparing a canary with its stable revision, and the value
    above which the canary is worse: P99 ratios, and increases of shares (0 unless significant)."""
    canary, w = cfg.canary, cfg.canary.window
    found = {
        f"{lat}_p99_ratio": (record(f"canary_{lat}_p99_vs_stable", f"ratio{w}"), canary.latency_ratio)
        for lat in LATENCIES
    }
    for sli in SLO_SLIS:
        name = record(f"canary_{sli}_slo_errors_vs_stable", f"increase{w}")
        found[f"{sli}_slo_miss_increase"] = (name, canary.slo_miss_increase)
    found["error_increase"] = (
        record("canary_request_errors_vs_stable", f"increase{w}"),
        canary.error_increase,
    )
    return found


def _slo_rates(cfg: AlertsConfig) -> list[Record]:
    """Per model and revision, 5 min rates of each SLI's requests under its bound and of those judged."""
    rules = []
    for sli in SLO_SLIS:
        metric = SLIS[sli][0]
        good, judged = record(f"{sli}_slo_good", "rate5m"), record(f"{sli}_slo_requests", "rate5m")
        under = sel(cfg, f"{metric}_bucket", f'le="{cfg.slo_bound(sli)}"')
        rules += [
            Record(good, f"sum by ({BY}) (rate({under}[5m]))"),
            # As per model: only the requests of histograms with the bound as a bucket are judged.
            Record(
                judged,
                f"sum by ({BY}) (rate({sel(cfg, metric + '_count')}[5m])"
                f" and on ({SERIES_BY}) rate({under}[5m]))",
            ),
            Record(record(f"{sli}_slo_errors", "ratio_rate5m"), f"1 - {good} / {judged}"),
        ]
    return rules


def _rates(cfg: AlertsConfig) -> list[Record]:
    """Per model and revision, 5 min rates: the SLIs', finished and failed requests, latency buckets and
    P99, preemptions; and the mean KV usage."""
    rules = _slo_rates(cfg)
    failed = sel(cfg, c.REQUESTS_FINISHED.name, f'finished_reason=~"{FAILED_REASONS}"')
    rules += [
        Record(FINISHED, f"sum by ({BY}) (rate({sel(cfg, c.REQUESTS_FINISHED.name)}[5m]))"),
        # A revision none of whose requests failed may export no failed series at all: 0, not absent.
        Record(FAILED, f"sum by ({BY}) (rate({failed}[5m])) or 0 * {FINISHED}"),
        Record(ERROR_RATIO, f"{FAILED} / {FINISHED}"),
    ]
    for latency in LATENCIES:
        buckets = record(f"{latency}_seconds_bucket", "rate5m", "model_revision_le")
        rules += [
            Record(buckets, f"sum by (le, {BY}) (rate({sel(cfg, HISTOGRAMS[latency] + '_bucket')}[5m]))"),
            Record(
                record(f"{latency}_seconds", "p99_rate5m"),
                f"histogram_quantile(0.99, sum by (le, {BY}) ({buckets}))",
            ),
        ]
    return [
        *rules,
        Record(PREEMPTIONS, f"sum by ({BY}) (rate({sel(cfg, c.PREEMPTIONS.name)}[5m]))"),
        Record(KV_USAGE, f"avg by ({BY}) ({sel(cfg, c.KV_USAGE.name)})"),
    ]


def _windowed(cfg: AlertsConfig) -> list[Record]:
    """Per model and revision over the canary window W, from the raw series: requests, shares of requests
    over the bound and of failed ones, P99s; then each model's stable revision.

    Counted with increase() over W, not as a mean rate times W: a canary started two minutes ago has
    served two minutes of requests, and must not be judged on ten. Each record reads raw series only
    (none divides by another), so none depends on when another was evaluated.
    """
    w = cfg.canary.window

    def increase(name: str, *matchers: str) -> str:
        return f"increase({sel(cfg, name, *matchers)}[{w}])"

    rules = []
    for sli in SLO_SLIS:
        metric = SLIS[sli][0]
        good = increase(f"{metric}_bucket", f'le="{cfg.slo_bound(sli)}"')
        judged = f"sum by ({BY}) ({increase(metric + '_count')} and on ({SERIES_BY}) {good})"
        rules += [
            Record(record(f"{sli}_slo_requests", f"increase{w}"), judged),
            Record(record(f"{sli}_slo_errors", f"ratio_rate{w}"), f"1 - sum by ({BY}) ({good}) / {judged}"),
        ]
    finished = f"sum by ({BY}) ({increase(c.REQUESTS_FINISHED.name)})"
    reasons = f'finished_reason=~"{FAILED_REASONS}"'
    failed = f"sum by ({BY}) ({increase(c.REQUESTS_FINISHED.name, reasons)})"
    rules += [
        Record(record("requests_finished", f"increase{w}"), finished),
        Record(record("request_errors", f"ratio_rate{w}"), f"({failed} or 0 * {finished}) / {finished}"),
    ]
    for latency in LATENCIES:
        buckets = increase(HISTOGRAMS[latency] + "_bucket")
        quantile = f"histogram_quantile(0.99, sum by (le, {BY}) ({buckets}))"
        rules.append(Record(record(f"{latency}_seconds", f"p99_rate{w}"), quantile))
    rules.append(
        Record(stable(cfg), f"topk by (model_name) (1, {record('ttft_slo_requests', f'increase{w}')})")
    )
    return rules


def pair(cfg: AlertsConfig) -> Pair:
    """Every revision but the stable one is a canary of its model."""
    top = stable(cfg)
    return Pair(cfg, Side(keep=f" unless on ({BY}) {top}"), Side(keep=f" and on ({BY}) {top}"))


def _comparisons(cfg: AlertsConfig) -> list[Record]:
    """Each canary revision against its model's stable one (labels gain `stable_revision`)."""
    compare = pair(cfg)
    built = {f"{lat}_p99_ratio": compare.latency_ratio(lat) for lat in LATENCIES}
    built |= {f"{sli}_slo_miss_increase": compare.slo_miss_increase(sli) for sli in SLO_SLIS}
    built["error_increase"] = compare.error_increase()
    return [Record(name, built[sli]) for sli, (name, _) in comparisons(cfg).items()]


def _revision_ratio(sli: str, window: str) -> str:
    """A revision's share of requests over the SLI's bound over `window`, from the 5 min rates."""
    if window == "5m":
        return record(f"{sli}_slo_errors", "ratio_rate5m")
    good, judged = record(f"{sli}_slo_good", "rate5m"), record(f"{sli}_slo_requests", "rate5m")
    return f"(1 - sum_over_time({good}[{window}]) / sum_over_time({judged}[{window}]))"


def paging_burn(sli: str) -> str:
    """Record: revisions that burn the SLI's budget at a paging rate; the value is the long window's share."""
    return record(f"{sli}_slo_errors", "paging_burn")


def _burns(cfg: AlertsConfig) -> list[Record]:
    """Each revision's burn of each SLO at the SLO page's rates and windows (its users' own budget)."""
    budget = cfg.error_budget

    def pair_burns(sli: str, factor: float, long: str, short: str) -> str:
        over = f"{factor:g} * {budget:g}"
        return f"({_revision_ratio(sli, long)} > {over} and {_revision_ratio(sli, short)} > {over})"

    return [
        Record(paging_burn(sli), " or ".join(pair_burns(sli, *page) for page in PAGE)) for sli in SLO_SLIS
    ]


def records(cfg: AlertsConfig) -> Group:
    """The SLIs per model and revision, and each canary against its stable revision."""
    rules = _rates(cfg) + _windowed(cfg) + _comparisons(cfg) + _burns(cfg)
    return Group("servescope-canary-records", tuple(rules))


def _named(expr: str, sli: str) -> str:
    return f'label_replace({expr}, "sli", "{sli}", "", "")'


def burning(cfg: AlertsConfig) -> str:
    """Canary revisions that burn an SLO at a paging rate and miss its bound significantly more often
    than the stable one (`sli` names the SLO); the value is the long window's share."""
    found = comparisons(cfg)
    branches = []
    for sli in SLO_SLIS:
        name, least = found[f"{sli}_slo_miss_increase"]
        worse_share = f"0 * ({name} > {least:g})"
        branches.append(
            _named(f"{paging_burn(sli)} + on ({BY}) group_left (stable_revision) {worse_share}", sli)
        )
    return " or ".join(branches)


def worse(cfg: AlertsConfig) -> str:
    """Each (canary revision, SLI) where the canary is worse: its value is the P99 ratio (`*_p99_ratio`)
    or the increase of the share of bad requests (`*_increase`). Not while the revision pages: the page
    says it all."""
    branches = [_named(f"{name} > {least:g}", sli) for sli, (name, least) in comparisons(cfg).items()]
    return f"({' or '.join(branches)}) unless on ({BY}) ({burning(cfg)})"


def alerts(cfg: AlertsConfig) -> Group:
    canary = cfg.canary
    names = "{{ $labels.model_name }} revision {{ $labels.revision }}"
    stable_one = "the stable revision {{ $labels.stable_revision }}"
    enough = f"over {canary.window}, both with at least {canary.min_requests} requests"
    return Group(
        "servescope-canary",
        (
            Alert(
                WORSE,
                worse(cfg),
                canary.worse_for,
                "warning",
                "A canary revision of a model serves significantly worse than its stable revision.",
                f"{names} is worse than {stable_one}: {{{{ $labels.sli }}}} is "
                f'{{{{ $value | printf "%.3g" }}}} ({enough}); analyse it with `servescope canary '
                "analyze`, then promote it or roll it back.",
                KEYS,
                "slo",
            ),
            Alert(
                BURN,
                burning(cfg),
                canary.burn_for,
                "critical",
                "A canary revision burns its users' SLO error budget, far worse than the stable one.",
                f"{names}: {{{{ $value | humanizePercentage }}}} of its requests miss the "
                f"{{{{ $labels.sli }}}} objective ({cfg.slo_objective:.2%} under the bound), a paging "
                f"burn rate, and significantly more than on {stable_one}: roll the canary back.",
                KEYS,
                "slo",
            ),
        ),
    )
