"""Serving SLO: traffic, latency percentile curves, SLO attainment and error-budget burn, queue and KV cache.

Latency SLIs are ratio SLIs (the share of requests under a bucket boundary: the config's slo_latency_le for
time to first token, slo_e2e_latency_le end to end), the same ones the burn-rate alerts are
built from; burn rates read the alert bundle's recording rules.
"""

from __future__ import annotations

import grafanalib.core as g

from servescope.bundle.alerts.rules_slo import LONG_LOOKBACK, LONG_WINDOWS, PAGE, error_ratio
from servescope.bundle.dashboards.common import (
    BY_ENGINE,
    ENGINE,
    ENGINE_LEGEND,
    Panel,
    m,
    make_dashboard,
    per_engine,
    per_quantile,
    rate,
    stat,
    ts,
)
from servescope.core import catalog as c
from servescope.core.catalog import derived as d
from servescope.core.config import AlertsConfig

QUANTILES = (0.5, 0.9, 0.99)
# (key, histogram, words): key matches the config's p99_histogram, whose panel carries the P99 threshold.
LATENCIES = (
    ("ttft", c.TTFT.name, "Time to first token"),
    ("itl", c.ITL.name, "Inter-token latency"),
    ("e2e", c.E2E.name, "End-to-end latency"),
)
SLIS = (("ttft", c.TTFT.name, "TTFT"), ("e2e", c.E2E.name, "e2e"))
# Each SLI has its own bound (end to end includes the whole decode): the config's, by histogram.
SLI_OF = {c.TTFT.name: "ttft", c.E2E.name: "e2e"}


def quantile(q: float, histogram: str, by: str = "model_name") -> str:
    return f"histogram_quantile({q:g}, sum by (le, {by}) ({rate(histogram + '_bucket')}))"


def le(histogram: str, cfg: AlertsConfig) -> str:
    """The matcher of the SLO's good bucket for this histogram."""
    return f'le="{cfg.slo_bound(SLI_OF[histogram])}"'


def attainment(histogram: str, cfg: AlertsConfig, by: str = "model_name") -> str:
    """Share of requests under the SLO bound: a ratio of rates, good (le bucket) over all (_count)."""
    good = f"sum by ({by}) ({rate(histogram + '_bucket', le(histogram, cfg))})"
    return f"{good} / sum by ({by}) ({rate(histogram + '_count')})"


def attainment_all(histogram: str, cfg: AlertsConfig) -> str:
    good = f"sum({rate(histogram + '_bucket', le(histogram, cfg))})"
    return f"{good} / sum({rate(histogram + '_count')})"


def tokens_per_second(by: str) -> str:
    return f"sum by ({by}) ({rate(c.PROMPT_TOKENS.name)}) + sum by ({by}) ({rate(c.GENERATION_TOKENS.name)})"


def latency_panel(cfg: AlertsConfig, key: str, histogram: str, words: str) -> Panel:
    alerted = key == cfg.p99_histogram
    note = (
        f" The red line is the P99 alert threshold ({cfg.p99_threshold_seconds:g} s, "
        f"Servescope{key.capitalize()}P99High after {cfg.p99_for})."
        if alerted
        else ""
    )
    return ts(
        f"{words} p50 / p90 / p99",
        per_quantile(lambda q: quantile(q, histogram), QUANTILES, "{{model_name}} "),
        "s",
        width=8,
        thresholds=[cfg.p99_threshold_seconds] if alerted else [],
        description=f"{words} percentiles per model, interpolated inside the engine's histogram buckets "
        "(a percentile is only as precise as the bucket it falls in). Widening p99 with a flat p50 means "
        f"a tail (long prompts, queueing, preemption), a rising p50 means overall load.{note}",
    )


_BURN_WINDOWS = [window for _, long, short in PAGE for window in (long, short)]


def _burn_series(sli: str, window: str) -> str:
    series = m(error_ratio(sli, window), ENGINE)
    # The bundle records the long windows every 5 min only: read their last record, as its alerts do.
    return f"last_over_time({series}[{LONG_LOOKBACK}])" if window in LONG_WINDOWS else series


def burn_panel(cfg: AlertsConfig, sli: str, words: str) -> Panel:
    budget = f"{cfg.error_budget:g}"
    return ts(
        f"{words} error-budget burn rate",
        [(f"{_burn_series(sli, w)} / {budget}", f"{{{{model_name}}}} {w}") for w in _BURN_WINDOWS],
        "none",
        thresholds=sorted(factor for factor, _, _ in PAGE),
        description=f"Share of requests over {cfg.slo_bound(sli)} s divided by the error budget "
        f"({budget}, objective {cfg.slo_objective:.2%}): 1 spends the 30-day budget in exactly 30 "
        "days. The fast-burn page "
        + " or ".join(f"{long} and {short} both above {factor:g}" for factor, long, short in PAGE)
        + " (red lines). Reads the alert bundle's recording rules "
        f"({error_ratio(sli, '<window>')}): empty where those rules are not loaded. A burn computed over a "
        "window longer than the data held is diluted.",
    )


def dashboard(cfg: AlertsConfig) -> g.Dashboard:
    """The dashboard, its thresholds and links from `cfg`."""
    # Long by nature: one declaration, the dashboard's panels in reading order.
    return make_dashboard(
        cfg,
        "serving-slo",
        f"Is the serving tier meeting its latency objective ({cfg.slo_objective:.2%} of requests under "
        f"{cfg.slo_latency_le} s to the first token, {cfg.slo_e2e_latency_le} s end to end)? Traffic, TTFT "
        f"/ ITL / end-to-end percentile "
        "curves, SLO attainment and error-budget burn, "
        "then the causes: queueing, KV cache pressure, preemptions.",
        [
            stat(
                "Requests/s",
                [(f"sum({rate(c.REQUESTS_FINISHED.name)})", "requests/s")],
                "reqps",
                width=6,
                description="Requests finished per second across the selected models, any finish reason.",
            ),
            stat(
                "Tokens/s",
                [(f"sum({rate(c.PROMPT_TOKENS.name)}) + sum({rate(c.GENERATION_TOKENS.name)})", "tokens/s")],
                "ops",
                width=6,
                description="Prompt plus generated tokens per second across the selected models.",
            ),
            stat(
                "P99 time to first token",
                [(f"histogram_quantile(0.99, sum by (le) ({rate(c.TTFT.name + '_bucket')}))", "p99")],
                "s",
                width=6,
                thresholds=[cfg.p99_threshold_seconds],
                description=f"P99 TTFT over all selected models; red above {cfg.p99_threshold_seconds:g} s.",
            ),
            stat(
                "TTFT SLO attainment",
                [(attainment_all(c.TTFT.name, cfg), "attained")],
                "percentunit",
                width=6,
                description=f"Share of requests whose first token came within {cfg.slo_latency_le} s "
                f"(objective "
                f"{cfg.slo_objective:.2%}).",
            ),
            ts(
                "Request rate",
                [(f"sum by (model_name) ({rate(c.REQUESTS_FINISHED.name)})", "{{model_name}}")],
                "reqps",
                description="Requests finished per second per model (all finish reasons; see the breakdown "
                "below). Read latency against it: latency that rises with traffic is load.",
            ),
            ts(
                "Tokens/s (prompt + generation)",
                [
                    (f"sum by (model_name) ({rate(c.PROMPT_TOKENS.name)})", "{{model_name}} prompt tokens/s"),
                    (
                        f"sum by (model_name) ({rate(c.GENERATION_TOKENS.name)})",
                        "{{model_name}} generation tokens/s",
                    ),
                    (tokens_per_second("model_name"), "{{model_name}} total tokens/s"),
                ],
                "ops",
                description="Prompt (prefill) and generated (decode) tokens per second per model, and "
                "their sum. "
                "Prefill-heavy traffic raises TTFT, decode-heavy traffic raises ITL.",
            ),
            *(latency_panel(cfg, key, histogram, words) for key, histogram, words in LATENCIES),
            ts(
                f"SLO attainment (TTFT under {cfg.slo_latency_le} s, e2e under {cfg.slo_e2e_latency_le} s)",
                [(attainment(histogram, cfg), f"{{{{model_name}}}} {label}") for _, histogram, label in SLIS],
                "percentunit",
                thresholds=[cfg.slo_objective],
                description=f"Share of requests under the bound, {cfg.slo_latency_le} s for time to first "
                f"token and {cfg.slo_e2e_latency_le} s "
                f'end to end: rate of the le="{cfg.slo_latency_le}" (or le="{cfg.slo_e2e_latency_le}") '
                f"bucket over the rate of _count. The "
                f"objective is {cfg.slo_objective:.2%} (red line); below it the error budget burns faster "
                "than it refills. End to end has its own bound because it includes the whole decode.",
            ),
            ts(
                "Running vs waiting requests",
                [
                    (m(c.RUNNING.name, ENGINE), f"{ENGINE_LEGEND} running"),
                    (m(c.WAITING.name, ENGINE), f"{ENGINE_LEGEND} waiting"),
                ],
                "none",
                description="Requests in each engine's running batch and in its queue. Waiting that stays "
                "above "
                f"{cfg.queue_min_waiting:g} and above {cfg.queue_ratio:g}x running for {cfg.queue_for} "
                "raises ServescopeRequestQueueBuilding: the engine is at its max_num_seqs or out of KV "
                "cache.",
            ),
            burn_panel(cfg, "ttft", "TTFT"),
            burn_panel(cfg, "e2e", "End-to-end"),
            ts(
                "KV cache usage",
                per_engine(c.KV_USAGE.name),
                "percentunit",
                thresholds=[cfg.kv_pressure_ratio],
                description=f"Share of each engine's KV cache in use. Above {cfg.kv_pressure_ratio:.0%} (red "
                f"line, ServescopeKvCachePressure after {cfg.kv_pressure_for}) start preventing OOM and "
                "preemption: fewer concurrent sequences, shorter max length, more engines.",
            ),
            ts(
                "Preemptions",
                [(f"sum by ({BY_ENGINE}) ({rate(c.PREEMPTIONS.name)})", ENGINE_LEGEND)],
                "ops",
                thresholds=[cfg.preemptions_per_second],
                description="Requests preempted per second (the KV cache ran out and a running request was "
                "evicted to be recomputed later). Any sustained rate costs latency; above "
                f"{cfg.preemptions_per_second:g}/s (red line) for {cfg.preemptions_for} raises "
                "ServescopePreemptionsSustained.",
            ),
            ts(
                "KV cache free tokens",
                per_engine(d.KV_FREE_TOKENS.name),
                "none",
                width=8,
                description="Tokens still free in each engine's KV cache (capacity x (1 - usage)): the "
                "absolute "
                "headroom behind the usage ratio.",
            ),
            ts(
                "Free max-length requests",
                per_engine(d.KV_FREE_REQUESTS.name),
                "none",
                width=8,
                description="How many more requests of the engine's max_model_len would fit in the free KV "
                "cache "
                "now. Near 0, a long request arriving forces preemption. Absent for engines that do not "
                "state their KV size and max concurrency (vLLM before 0.11).",
            ),
            ts(
                "Time to KV saturation",
                per_engine(d.KV_SATURATION.name),
                "s",
                width=8,
                description="Seconds until KV usage reaches 100% at its 5-minute trend; +Inf (no point drawn "
                "high) while usage is flat or falling. Minutes here while usage climbs means preemptions "
                "soon.",
            ),
            ts(
                "Finish reasons",
                [
                    (
                        f"sum by (model_name, finished_reason) ({rate(c.REQUESTS_FINISHED.name)})",
                        "{{model_name}} {{finished_reason}}",
                    )
                ],
                "reqps",
                description="Finished requests per second by reason: stop (normal end), length (hit "
                "max_tokens "
                "or the context limit), abort (client gave up, often after a latency spike), error. A rising "
                "abort share is users timing out.",
            ),
            ts(
                "Queue time p50 / p90 / p99",
                per_quantile(lambda q: quantile(q, c.QUEUE_TIME.name), QUANTILES, "{{model_name}} "),
                "s",
                description="Time requests waited before entering the running batch. Queue time is part of "
                "TTFT: "
                "when TTFT p99 and queue-time p99 rise together, the fix is capacity (or a smaller batch's "
                "faster steps), not the model.",
            ),
        ],
        filters=["model_name"],
    )
