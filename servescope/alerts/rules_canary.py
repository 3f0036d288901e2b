"""Per-revision SLO records, and the alerts for a canary revision worse than the stable one.

Every serving series carries the pod's rollout `revision` (servescope.catalog.revision). The records
below are the bundle's SLIs per model and revision; the alerts compare each revision of a model with the
one serving most of its requests (the stable), over `canary.window`, once both served
`canary.min_requests`: fewer is not enough data, and no alert. A regression of every revision alike
changes no comparison: it is the model's SLO page, never a canary alert.
"""

from __future__ import annotations

from servescope import catalog as c
from servescope.alerts.canary_exprs import (
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
    bucket_rate,
    error_ratio_in,
    finished_in,
    good_rate,
    miss_ratio,
    miss_ratio_in,
    p99,
    p99_in,
    requests_in,
    requests_rate,
)
from servescope.alerts.config import AlertsConfig
from servescope.alerts.model import Alert, Group, Record, sel
from servescope.alerts.rules_slo import PAGE, SERIES_BY, SLIS

HISTOGRAMS = {"ttft": c.TTFT.name, "itl": c.ITL.name}
KEYS = ("model_name", "revision", "stable_revision", "sli")
WORSE = "ServescopeCanaryWorseThanStable"
BURN = "ServescopeCanarySloBurn"


def stable(cfg: AlertsConfig) -> str:
    """Record: the revision with most requests of each model over the canary window, the stable one."""
    return f"model_revision:servescope_ttft_slo_requests:stable_increase{cfg.canary.window}"


def latency_vs_stable(latency: str, window: str) -> str:
    """Record: a canary's P99 over the window as a multiple of the stable's."""
    return f"model_revision:servescope_canary_{latency}_p99_vs_stable:ratio{window}"


def slo_miss_vs_stable(sli: str, window: str) -> str:
    """Record: a canary's share of requests over the bound minus the stable's, 0 unless significant."""
    return f"model_revision:servescope_canary_{sli}_slo_errors_vs_stable:increase{window}"


def errors_vs_stable(window: str) -> str:
    """Record: a canary's share of failed requests minus the stable's, 0 unless significant."""
    return f"model_revision:servescope_canary_request_errors_vs_stable:increase{window}"


def _rates(cfg: AlertsConfig) -> list[Record]:
    """Per model and revision, 5 min rates: the SLIs' good and judged requests, finished and failed
    requests, latency buckets and P99, preemptions; and the mean KV usage."""
    rules = []
    for sli in SLO_SLIS:
        metric = SLIS[sli][0]
        good = sel(cfg, f"{metric}_bucket", f'le="{cfg.slo_bound(sli)}"')
        total = sel(cfg, f"{metric}_count")
        rules += [
            Record(good_rate(sli), f"sum by ({BY}) (rate({good}[5m]))"),
            # As per model: only the requests of histograms with the bound as a bucket are judged.
            Record(
                requests_rate(sli),
                f"sum by ({BY}) (rate({total}[5m]) and on ({SERIES_BY}) rate({good}[5m]))",
            ),
            Record(miss_ratio(sli), f"1 - {good_rate(sli)} / {requests_rate(sli)}"),
        ]
    finished = sel(cfg, c.REQUESTS_FINISHED.name)
    failed = sel(cfg, c.REQUESTS_FINISHED.name, f'finished_reason=~"{FAILED_REASONS}"')
    rules += [
        Record(FINISHED, f"sum by ({BY}) (rate({finished}[5m]))"),
        # A revision none of whose requests failed may export no failed series at all: 0, not absent.
        Record(FAILED, f"sum by ({BY}) (rate({failed}[5m])) or 0 * {FINISHED}"),
        Record(ERROR_RATIO, f"{FAILED} / {FINISHED}"),
    ]
    for latency in LATENCIES:
        buckets = sel(cfg, f"{HISTOGRAMS[latency]}_bucket")
        rules += [
            Record(bucket_rate(latency), f"sum by (le, {BY}) (rate({buckets}[5m]))"),
            Record(p99(latency), f"histogram_quantile(0.99, sum by (le, {BY}) ({bucket_rate(latency)}))"),
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
    served two minutes of requests, and must not be judged on ten.
    """
    w = cfg.canary.window
    rules = []
    for sli in SLO_SLIS:
        metric = SLIS[sli][0]
        bound = f'le="{cfg.slo_bound(sli)}"'
        good = f"increase({sel(cfg, metric + '_bucket', bound)}[{w}])"
        total = f"increase({sel(cfg, metric + '_count')}[{w}])"
        judged = f"sum by ({BY}) ({total} and on ({SERIES_BY}) {good})"
        rules += [
            Record(requests_in(sli, w), judged),
            # Not divided by the record above: each record reads only raw series, so none depends on
            # when another was evaluated.
            Record(miss_ratio_in(sli, w), f"1 - sum by ({BY}) ({good}) / {judged}"),
        ]
    finished = f"sum by ({BY}) (increase({sel(cfg, c.REQUESTS_FINISHED.name)}[{w}]))"
    failed = sel(cfg, c.REQUESTS_FINISHED.name, f'finished_reason=~"{FAILED_REASONS}"')
    rules += [
        Record(finished_in(w), finished),
        Record(
            error_ratio_in(w), f"(sum by ({BY}) (increase({failed}[{w}])) or 0 * {finished}) / {finished}"
        ),
        *(
            Record(
                p99_in(latency, w),
                "histogram_quantile(0.99, sum by (le, "
                f"{BY}) (increase({sel(cfg, HISTOGRAMS[latency] + '_bucket')}[{w}])))",
            )
            for latency in LATENCIES
        ),
        Record(stable(cfg), f"topk by (model_name) (1, {requests_in('ttft', w)})"),
    ]
    return rules


def pair(cfg: AlertsConfig) -> Pair:
    """Every revision but the stable one is a canary of its model."""
    top = stable(cfg)
    return Pair(cfg, Side(keep=f" unless on ({BY}) {top}"), Side(keep=f" and on ({BY}) {top}"))


def _comparisons(cfg: AlertsConfig) -> list[Record]:
    """Each canary revision against its model's stable one (labels gain `stable_revision`)."""
    compare, w = pair(cfg), cfg.canary.window
    return [
        *(Record(latency_vs_stable(latency, w), compare.latency_ratio(latency)) for latency in LATENCIES),
        *(Record(slo_miss_vs_stable(sli, w), compare.slo_miss_increase(sli)) for sli in SLO_SLIS),
        Record(errors_vs_stable(w), compare.error_increase()),
    ]


def records(cfg: AlertsConfig) -> Group:
    """The SLIs per model and revision, and each canary against its stable revision."""
    rules = _rates(cfg) + _windowed(cfg) + _comparisons(cfg) + _burns(cfg)
    return Group("servescope-canary-records", tuple(rules))


def _named(expr: str, sli: str) -> str:
    return f'label_replace({expr}, "sli", "{sli}", "", "")'


def worse(cfg: AlertsConfig) -> str:
    """Each (canary revision, SLI) where the canary is worse: its value is the P99 ratio (`*_p99_ratio`)
    or the increase of the share of bad requests (`*_increase`). Not while the revision pages: the page
    says it all."""
    canary, w = cfg.canary, cfg.canary.window
    branches = [
        _named(f"{latency_vs_stable(latency, w)} > {canary.latency_ratio:g}", f"{latency}_p99_ratio")
        for latency in LATENCIES
    ]
    branches += [
        _named(f"{slo_miss_vs_stable(sli, w)} > {canary.slo_miss_increase:g}", f"{sli}_slo_miss_increase")
        for sli in SLO_SLIS
    ]
    branches.append(_named(f"{errors_vs_stable(w)} > {canary.error_increase:g}", "error_increase"))
    return f"({' or '.join(branches)}) unless on ({BY}) ({burning(cfg)})"


def _revision_ratio(sli: str, window: str) -> str:
    """A revision's share of requests over the SLI's bound over `window`, from the 5 min rates."""
    if window == "5m":
        return miss_ratio(sli)
    return f"(1 - sum_over_time({good_rate(sli)}[{window}]) / sum_over_time({requests_rate(sli)}[{window}]))"


def paging_burn(sli: str) -> str:
    """Record: revisions that burn the SLI's budget at a paging rate; the value is the long window's share."""
    return f"model_revision:servescope_{sli}_slo_errors:paging_burn"


def _burns(cfg: AlertsConfig) -> list[Record]:
    """Each revision's burn of each SLO at the SLO page's rates and windows (its users' own budget)."""
    budget = cfg.error_budget
    return [
        Record(
            paging_burn(sli),
            " or ".join(
                f"({_revision_ratio(sli, long)} > {factor:g} * {budget:g}"
                f" and {_revision_ratio(sli, short)} > {factor:g} * {budget:g})"
                for factor, long, short in PAGE
            ),
        )
        for sli in SLO_SLIS
    ]


def burning(cfg: AlertsConfig) -> str:
    """Canary revisions that burn an SLO at a paging rate and miss its bound significantly more often
    than the stable one (`sli` names the SLO); the value is the long window's share."""
    canary = cfg.canary
    return " or ".join(
        _named(
            f"{paging_burn(sli)} + on ({BY}) group_left (stable_revision)"
            f" 0 * ({slo_miss_vs_stable(sli, canary.window)} > {canary.slo_miss_increase:g})",
            sli,
        )
        for sli in SLO_SLIS
    )


def alerts(cfg: AlertsConfig) -> Group:
    canary = cfg.canary
    names = "{{ $labels.model_name }} revision {{ $labels.revision }}"
    stable = "the stable revision {{ $labels.stable_revision }}"
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
                f"{names} is worse than {stable}: {{{{ $labels.sli }}}} is "
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
                f"burn rate, and significantly more than on {stable}: roll the canary back.",
                KEYS,
                "slo",
            ),
        ),
    )
