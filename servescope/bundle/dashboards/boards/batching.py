"""Batching efficiency: how full each engine step is, what a larger batch buys, and what the advisor says.

`servescope_serving_iteration_tokens` counts tokens per engine STEP: its _count rate is steps/s, never
tokens/s. Tokens/s is the rate of prompt plus generation tokens.
"""

from __future__ import annotations

from typing import Any

import grafanalib.core as g

from servescope.bundle.dashboards.common import (
    BY_ENGINE,
    ENGINE,
    ENGINE_LEGEND,
    heatmap,
    m,
    make_dashboard,
    rate,
    ts,
)
from servescope.core import catalog as c
from servescope.core.batch_controller import DEFAULT_MAX_SEQS
from servescope.core.catalog import derived as d
from servescope.core.config import AlertsConfig

STEPS = c.ITERATION_TOKENS.name
# vLLM does not export max_num_seqs; the advisor steps from this setting (--advisor-max-num-seqs).
CONFIGURED_MAX_NUM_SEQS = DEFAULT_MAX_SEQS


def rate_per_engine(metric: str) -> str:
    """The per-second rate of `metric` summed per engine (common.per_engine shows a gauge as it is)."""
    return f"sum by ({BY_ENGINE}) ({rate(metric)})"


TOKENS_PER_SECOND = f"{rate_per_engine(c.PROMPT_TOKENS.name)} + {rate_per_engine(c.GENERATION_TOKENS.name)}"
RUNNING = f"max by ({BY_ENGINE}) ({m(c.RUNNING.name, ENGINE)})"
# GPU utilisation of each engine's GPUs, averaged per engine. The engine->GPU map is the "many" side, so
# two engines sharing a GPU still match; utilisation is reduced to one series per uuid (a GPU scraped by
# two jobs or instances would otherwise make the match ambiguous), and uuid is unique across nodes.
ENGINE_GPU_UTILISATION = (
    f"avg by ({BY_ENGINE}) ("
    f"max by (uuid, {BY_ENGINE}) ({m(c.ENGINE_GPU_INFO.name, ENGINE)})"
    f" * on (uuid) group_left () max by (uuid) ({c.UTILIZATION.name}))"
)


def right_axis(ref_id: str, unit: str) -> dict[str, Any]:
    """Draw query `ref_id` on a right-hand axis in its own unit, without the panel's threshold lines."""
    return {
        "fieldConfig": {
            "overrides": [
                {
                    "matcher": {"id": "byFrameRefID", "options": ref_id},
                    "properties": [
                        {"id": "unit", "value": unit},
                        {"id": "custom.axisPlacement", "value": "right"},
                        {"id": "custom.thresholdsStyle", "value": {"mode": "off"}},
                    ],
                }
            ]
        }
    }


def dashboard(cfg: AlertsConfig) -> g.Dashboard:
    """The dashboard, its thresholds and links from `cfg`."""
    # Long by nature: one declaration, the dashboard's panels in reading order.
    return make_dashboard(
        cfg,
        "batching",
        "How much work each engine step does and what batching buys: tokens per step, steps/s, tokens/s "
        "against the running batch and GPU utilisation, the batch-size advisor's recommendation, "
        "prefix-cache "
        "reuse.",
        [
            heatmap(
                "Tokens per engine step",
                f"sum by (le) ({rate(STEPS + '_bucket')})",
                "none",
                width=24,
                description="Distribution of tokens processed per engine step (a step runs the whole batch "
                "once: "
                "one token per decoding request plus prefill chunks). Mass in the low buckets = small "
                "batches "
                "and an under-used GPU; mass at the top = steps capped by max_num_batched_tokens.",
            ),
            ts(
                "Engine steps/s",
                [(rate_per_engine(STEPS + "_count"), f"{ENGINE_LEGEND} steps/s")],
                "ops",
                width=8,
                description="Engine steps (forward passes) per second: the rate of the tokens-per-step "
                "histogram's _count. Steps, not tokens: tokens/s is on the panels to the right.",
            ),
            ts(
                "Mean tokens per step",
                [(f"{rate_per_engine(STEPS + '_sum')} / {rate_per_engine(STEPS + '_count')}", ENGINE_LEGEND)],
                "none",
                width=8,
                description="Tokens per step averaged over the interval (rate of _sum over rate of _count). "
                "Higher is better batching; it falls when traffic is thin or max_num_seqs is too small.",
            ),
            ts(
                "Tokens/s per engine",
                [(TOKENS_PER_SECOND, f"{ENGINE_LEGEND} tokens/s")],
                "ops",
                width=8,
                description="Prompt plus generated tokens per second per engine: the throughput that "
                "batching "
                "is meant to raise. Equals steps/s x mean tokens per step.",
            ),
            ts(
                "Throughput vs batch size",
                [
                    (TOKENS_PER_SECOND, f"{ENGINE_LEGEND} tokens/s"),
                    (RUNNING, f"{ENGINE_LEGEND} running requests"),
                ],
                "ops",
                extra=right_axis("B", "none"),
                description="Tokens/s (left axis) next to the running batch (right axis) per engine. While "
                "tokens/s grows with the batch, batching pays; when the batch grows and tokens/s flattens "
                "the "
                "engine is saturated (KV memory bandwidth, SM contention) and a larger batch only adds "
                "latency.",
            ),
            ts(
                "Batching efficiency matrix: tokens/s per running request",
                [(f"({TOKENS_PER_SECOND}) / clamp_min({RUNNING}, 1)", ENGINE_LEGEND)],
                "ops",
                description="Tokens/s divided by the running batch (at least 1), per engine; the legend "
                "table is "
                "the matrix (engines x last / max). Read it against the batch size: per-request throughput "
                "that "
                "holds as the batch grows is efficient batching; a steep drop means each added sequence "
                "slows "
                "every other one (operators measured 3.2x QPS for +120% P99 going from batch 1 to 8).",
            ),
            ts(
                "GPU utilisation vs tokens/s",
                [
                    (ENGINE_GPU_UTILISATION, f"{ENGINE_LEGEND} GPU utilisation"),
                    (TOKENS_PER_SECOND, f"{ENGINE_LEGEND} tokens/s"),
                ],
                "percentunit",
                thresholds=[cfg.underutilised_ratio, cfg.gpu_saturated_ratio],
                extra=right_axis("B", "ops"),
                description="Mean utilisation of each engine's GPUs (left; joined through "
                "servescope_engine_gpu_info on uuid) next to its tokens/s (right). Red lines: "
                f"{cfg.underutilised_ratio:.0%} (under-utilised while requests queue) and "
                f"{cfg.gpu_saturated_ratio:.0%} (saturated). High utilisation with flat tokens/s is a "
                "compute bottleneck: lower the batch first, then add workers.",
            ),
            ts(
                "Recommended vs configured max_num_seqs",
                [
                    (
                        m(d.RECOMMENDED_MAX_NUM_SEQS.name, ENGINE),
                        f"{ENGINE_LEGEND} recommended ({{{{reason}}}})",
                    )
                ],
                "none",
                thresholds=[CONFIGURED_MAX_NUM_SEQS],
                description="The advisor's batch-size recommendation per engine (x0.8 when window P99 is "
                "over "
                "the SLO, x1.2 when GPU utilisation is low, else kept; reason names the rule). Nothing is "
                "changed by servescope. vLLM does not export its configured max_num_seqs, so the red line "
                "is the "
                f"exporter's --advisor-max-num-seqs default ({CONFIGURED_MAX_NUM_SEQS}), the value the "
                f"advisor "
                "steps from; if your exporter runs with another value, the line is not your configuration.",
            ),
            ts(
                "Prefix cache hit ratio",
                [
                    (
                        f"{rate_per_engine(c.PREFIX_HITS.name)} / {rate_per_engine(c.PREFIX_QUERIES.name)}",
                        ENGINE_LEGEND,
                    )
                ],
                "percentunit",
                width=24,
                description="Share of prefix-cache lookups that hit (rate of hits over rate of queries; "
                "counted "
                "in tokens on current vLLM). Hits skip prefill compute, so a higher ratio means more "
                "tokens/s "
                "for the same steps; a drop after a prompt-template change is expected.",
            ),
        ],
        filters=["model_name"],
    )
