"""GPU memory: where device memory stands, how fast it grows, when it runs out, and who holds it.

The operators' OOM playbook watches the memory curve at 1 s resolution; a 15-30 s scrape misses the
spikes, so the exporter keeps 1 s samples and exports their peak and minimum per window, a robust growth
rate, the time to exhaustion and a leak verdict. This dashboard draws those with the alert thresholds.
"""

from __future__ import annotations

from typing import Any

import grafanalib.core as g

from servescope.bundle.dashboards.common import GPU, count_stat, heatmap, m, make_dashboard, stat, ts
from servescope.core.config import AlertsConfig

USED = "servescope_gpu_memory_used_bytes"
TOTAL = "servescope_gpu_memory_total_bytes"
PEAK = "servescope_gpu_memory_used_peak_bytes"
MIN = "servescope_gpu_memory_used_min_bytes"
GROWTH = "servescope_gpu_memory_growth_bytes_per_second"
EXHAUSTION = "servescope_gpu_memory_exhaustion_seconds"
LEAK = "servescope_gpu_memory_leak_suspected"
PROCESS_PEAK = "servescope_gpu_process_memory_used_peak_bytes"
OVER_BUDGET = "servescope_serving_memory_over_budget_bytes"
SVG = "/api/v1/gpus/<gpu>/memory.svg"
GPU_ONLY = 'gpu=~"$gpu"'
WINDOWS = 'window=~"5m|30m"'
# Every panel has data in the memory-leak scenario; none is about faults.
FAULT_ONLY: list[str] = []

# The over-budget series carry the engine's labels and gpu/uuid but no hostname: the join with
# servescope_gpu_info (value 1) adds it and applies the host filter.
HOST_OF_GPU = f"on (instance, uuid) group_left (hostname) {m('servescope_gpu_info', GPU)}"
OVER = f"{m(OVER_BUDGET, GPU_ONLY)} * {HOST_OF_GPU}"
HEADROOM = f"({m(TOTAL, GPU)} - {m(PEAK, GPU)}) / {m(TOTAL, GPU)}"
# A link on every curve to the exporter's own 1 s plot of that GPU (instance = the exporter's address).
SVG_LINK = {
    "fieldConfig": {
        "defaults": {
            "links": [
                {
                    "title": "1 s memory curve of ${__field.labels.hostname} GPU ${__field.labels.gpu}",
                    "url": "http://${__field.labels.instance}"
                    + SVG.replace("<gpu>", "${__field.labels.gpu}")
                    + "?window=30m",
                    "targetBlank": True,
                }
            ]
        }
    }
}


def headroom_colours(cfg: AlertsConfig) -> dict[str, Any]:
    """Lower is worse for headroom: red under the alert, orange under the operators' buffer."""
    steps = [
        {"color": "red", "value": None},
        {"color": "orange", "value": cfg.memory_headroom_ratio},
        {"color": "green", "value": cfg.capacity_buffer_ratio},
    ]
    return {"fieldConfig": {"defaults": {"min": 0, "thresholds": {"mode": "absolute", "steps": steps}}}}


STATE = {
    "fieldConfig": {
        "defaults": {
            "min": 0,
            "max": 1,
            "decimals": 0,
            "custom": {"lineInterpolation": "stepAfter", "fillOpacity": 30},
            "mappings": [
                {
                    "type": "value",
                    "options": {
                        "0": {"text": "no leak", "color": "green", "index": 0},
                        "1": {"text": "leak suspected", "color": "red", "index": 1},
                    },
                }
            ],
        }
    }
}
# The total is the ceiling, not a curve to compare: drawn dashed and grey.
TOTAL_DASHED = {
    "fieldConfig": {
        "overrides": [
            {
                "matcher": {"id": "byRegexp", "options": ".* total$"},
                "properties": [
                    {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                    {"id": "color", "value": {"mode": "fixed", "fixedColor": "text"}},
                ],
            }
        ]
    }
}
LOG_SCALE = {"fieldConfig": {"defaults": {"custom": {"scaleDistribution": {"type": "log", "log": 10}}}}}
# GPUs x time: each series one row (legacy `tsbuckets`, and the current heatmap's calculate=false). The
# colour scale follows the data: serving GPUs all sit near gpu_memory_utilization, so a fixed 0-1 scale
# would paint them alike and hide the one that creeps up.
ROWS = {
    "dataFormat": "tsbuckets",
    "yBucketBound": "middle",
    "hideZeroBuckets": False,
    "color": {
        "mode": "spectrum",
        "colorScheme": "interpolateOranges",
        "exponent": 0.5,
        "cardColor": "#b4ff00",
        "colorScale": "sqrt",
    },
    "fieldConfig": {"defaults": {"unit": "percentunit"}},
    "options": {
        "calculate": False,
        "cellGap": 1,
        "cellValues": {"unit": "percentunit", "decimals": 1},
        "color": {
            "mode": "scheme",
            "scheme": "Oranges",
            "fill": "dark-orange",
            "steps": 64,
            "exponent": 0.5,
            "reverse": False,
        },
        "rowsFrame": {"layout": "auto"},
        "yAxis": {"axisPlacement": "left", "reverse": False},
        "tooltip": {"mode": "single", "yHistogram": False, "showColorScale": True},
        "legend": {"show": True},
        "showValue": "never",
    },
}


def dashboard(cfg: AlertsConfig) -> g.Dashboard:
    """The dashboard, its thresholds and links from `cfg`."""
    # Long by nature: one declaration, the dashboard's panels in reading order.
    return make_dashboard(
        cfg,
        "gpu-memory",
        "Device memory per GPU: share used (heatmap), the 1 s peak and minimum, growth over 5 and 30 min, "
        "time "
        "to exhaustion, leak verdicts, free memory at the peak, and memory held outside the serving engine's "
        f"gpu_memory_utilization budget. The exporter draws the 1 s curve itself at {SVG}; the JSON behind "
        f"it "
        "(with the leak verdict's reason) is /api/v1/gpus/<gpu>/memory.",
        [
            count_stat(
                "GPUs with a suspected leak",
                f"count({m(LEAK, GPU)} == 1)",
                "leaking",
                width=6,
                description="GPUs whose memory grew steadily for 30 min while load and KV usage stayed flat. "
                f"The alert fires after {cfg.leak_for} of it.",
            ),
            stat(
                "Soonest exhaustion",
                [(f"min({m(EXHAUSTION, GPU)} < +Inf)", "soonest")],
                "s",
                width=6,
                description="Shortest time to exhaustion of any GPU, at its 5 or 30 min growth rate. "
                "GPUs whose memory is not growing (+Inf) are left out.",
            ),
            stat(
                "Lowest headroom at peak",
                [(f"min({HEADROOM})", "lowest")],
                "percentunit",
                width=6,
                description="The smallest share of a GPU's memory still free at its 1 s peak. "
                f"Alert under {cfg.memory_headroom_ratio:.0%}.",
            ),
            stat(
                "Most memory outside a serving budget",
                [(f"max({OVER})", "max")],
                "bytes",
                width=6,
                thresholds=[cfg.over_budget_bytes],
                description="The largest overrun of an engine's gpu_memory_utilization budget on one GPU; "
                "negative means every engine stays inside its budget.",
            ),
            heatmap(
                "Memory used share, per GPU",
                f"{m(USED, GPU)} / {m(TOTAL, GPU)}",
                "percentunit",
                legend="{{hostname}} {{gpu}}",
                width=24,
                extra=ROWS,
                description="One row per GPU, one column per time step; the colour is memory used / total. "
                "A serving GPU sits near vLLM's gpu_memory_utilization (typically 0.9) by design; a row that "
                "darkens steadily over time is the leak signature.",
            ),
            ts(
                "Memory used: 1 s peak, minimum, total",
                [
                    (m(PEAK, GPU), "{{hostname}} {{gpu}} peak"),
                    (m(USED, GPU), "{{hostname}} {{gpu}} used"),
                    (m(MIN, GPU), "{{hostname}} {{gpu}} min"),
                    (m(TOTAL, GPU), "{{hostname}} {{gpu}} total"),
                ],
                "bytes",
                width=24,
                extra={"fieldConfig": {**SVG_LINK["fieldConfig"], **TOTAL_DASHED["fieldConfig"]}},
                description="Peak and minimum of the exporter's 1 s samples over its peak window (default "
                "60 s), "
                "so a spike between two scrapes still shows; 'used' is the sampled value. The 1 s curve "
                "itself: "
                f"click a series for the exporter's {SVG} (JSON without .svg).",
            ),
            ts(
                "Growth rate (5 min, 30 min)",
                [(m(GROWTH, GPU, WINDOWS), "{{hostname}} {{gpu}} {{window}}")],
                "binBps",
                description="Robust (Theil-Sen) slope of the 1 s samples over each window, immune to the "
                "allocator's sawtooth. A window appears once the history covers half of it.",
            ),
            ts(
                "Time to exhaustion",
                [(f"{m(EXHAUSTION, GPU, WINDOWS)} < +Inf", "{{hostname}} {{gpu}} {{window}}")],
                "s",
                thresholds=[cfg.exhaustion_seconds],
                extra=LOG_SCALE,
                description="Seconds until used memory reaches used + free at the window's growth rate "
                f"(log scale). The alert fires under {cfg.exhaustion_seconds:.0f} s on the "
                f"{cfg.exhaustion_window} window for {cfg.exhaustion_for}. Non-growing GPUs are not drawn.",
            ),
            ts(
                "Leak suspected",
                [(m(LEAK, GPU), "{{hostname}} {{gpu}}")],
                "none",
                thresholds=[1],
                extra=STATE,
                description="1 while the exporter suspects a leak: steady growth over 30 min (at least 4 "
                "min of "
                "history) while serving load and KV usage stayed flat. The exporter's "
                "/api/v1/gpus/<gpu>/memory "
                "says why.",
            ),
            ts(
                "Headroom at peak vs the buffer",
                [(HEADROOM, "{{hostname}} {{gpu}}")],
                "percentunit",
                thresholds=[cfg.memory_headroom_ratio, cfg.capacity_buffer_ratio],
                extra=headroom_colours(cfg),
                description="Free memory at the 1 s peak / total. Alert under "
                f"{cfg.memory_headroom_ratio:.0%} for {cfg.memory_headroom_for}. The operators' "
                f"{cfg.capacity_buffer_ratio:.0%} buffer is a fleet capacity target: a vLLM GPU preallocates "
                "gpu_memory_utilization and sits below it by design.",
            ),
            ts(
                "Memory outside the serving budget",
                [(OVER, "{{hostname}} {{gpu}} {{model_name}} engine {{engine}}")],
                "bytes",
                thresholds=[cfg.over_budget_bytes],
                description="Memory held by the engine's processes on the GPU minus gpu_memory_utilization x "
                "total. Negative: inside the budget. Positive: a leak or fragmentation outside the KV pool; "
                f"alert above {cfg.over_budget_bytes / 2**30:.0f} GiB for {cfg.over_budget_for}.",
            ),
            ts(
                "Per-process memory peak",
                [(m(PROCESS_PEAK, GPU), "{{hostname}} {{gpu}} pid {{pid}}")],
                "bytes",
                description="1 s peak of each compute process's device memory (host PIDs). Which engine a "
                "PID "
                "is: servescope_engine_gpu_info{pid}.",
            ),
        ],
        filters=["hostname", "gpu"],
    )
