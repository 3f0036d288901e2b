"""promtool cases for the production daily baseline (group servescope-capacity-baseline).

Eight days of one engine on 2 GPUs at 1000 output tokens/s (500 per GPU) with 50 requests running, then
at 7d12h (10800 min) a change: throughput falls to 700 tokens/s at the same batch (fires after `for: 1h`,
resolves when it recovers), or falls with the batch (the traffic got lighter: silent), or the engine
has only ten hours of history (no day-old baseline: silent). A second process of the engine on one
of its GPUs (two servescope_engine_gpu_info series for that GPU) still counts 2 GPUs: silent where it
starts at the change, firing where it ran all along and the engine got slower. Rules are evaluated
every 15 minutes to keep eight days of evaluations of the whole bundle short.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from servescope.bundle.alerts.bundle import rule_file
from servescope.bundle.alerts.model import BUNDLE_LABEL
from servescope.core.config import AlertsConfig
from tests.alerts.promtool import (
    ALERTS,
    CONFIG,
    ENGINE,
    case,
    check,
    firing,
    run_promtool,
    series,
)

ALERT = "ServescopeThroughputBelowBaseline"
CHANGE = 10800  # minutes: 7 days 12 hours
END = 11400
DESCRIPTION = (
    f"{ENGINE['model_name']} engine {ENGINE['engine']} on {ENGINE['instance']} has generated over 10% fewer "
    "tokens per second per GPU than a day ago (and a week ago) for 1h, with the same running batch: the "
    "engine got slower, not the traffic lighter."
)
GPUS = [
    series(
        "servescope_engine_gpu_info",
        {**ENGINE, "uuid": f"GPU-000{i}", "gpu": str(i), "pid": "42"},
        f"1x{END}",
    )
    for i in (0, 1)
]


def _tokens(before: int, after: int, back_at: int | None = None) -> str:
    """A counter rising `before` tokens/min to CHANGE, `after` from then (and `before` again from back_at)."""
    value = before * CHANGE
    if back_at is None:
        return f"0+{before}x{CHANGE - 1} {value}+{after}x{END - CHANGE}"
    slow = back_at - CHANGE
    resumed = value + after * slow
    return f"0+{before}x{CHANGE - 1} {value}+{after}x{slow - 1} {resumed}+{before}x{END - back_at}"


def _running(before: int, after: int) -> str:
    return f"{before}x{CHANGE - 1} {after}x{END - CHANGE}"


def _tokens_series(values: str) -> dict[str, str]:
    return series("servescope_serving_generation_tokens_total", ENGINE, values)


def _running_series(values: str) -> dict[str, str]:
    return series("servescope_serving_requests_running", ENGINE, values)


SLOWER = case(
    f"{ALERT}: slower at the same batch",
    [
        *GPUS,
        _tokens_series(_tokens(60_000, 42_000, back_at=CHANGE + 180)),
        _running_series(_running(50, 50)),
    ],
    check(ALERT, f"{CHANGE - 10}m"),  # before the change
    check(ALERT, f"{CHANGE + 40}m"),  # below the baseline, pending for less than 1h
    check(ALERT, f"{CHANGE + 90}m", firing(ALERT, ENGINE, DESCRIPTION)),
    check(ALERT, f"{CHANGE + 200}m"),  # recovered at +180m,
)
LIGHTER = case(
    f"{ALERT}: lighter traffic, same speed per request",
    [*GPUS, _tokens_series(_tokens(60_000, 36_000)), _running_series(_running(50, 30))],
    check(ALERT, f"{CHANGE + 90}m"),
    check(ALERT, f"{CHANGE + 300}m"),
)
NO_HISTORY = case(
    f"{ALERT}: no day-old baseline yet",
    [
        *(
            series(
                s["series"].split("{")[0],
                {**ENGINE, "uuid": f"GPU-000{i}", "gpu": str(i), "pid": "42"},
                f"_x{CHANGE - 600} 1x1200",
            )
            for i, s in enumerate(GPUS)
        ),
        _tokens_series(f"_x{CHANGE - 600} 0+60000x599 36000000+42000x600"),
        _running_series(f"_x{CHANGE - 600} 50x1200"),
    ],
    check(ALERT, f"{CHANGE + 90}m"),
    check(ALERT, f"{CHANGE + 500}m"),
)


def _second_pid(pid_values: str, tokens_after: int) -> list[dict[str, str]]:
    """The engine at the same batch, with another process on GPU 0 (a second info series for it)."""
    second = {**ENGINE, "uuid": "GPU-0000", "gpu": "0", "pid": "43"}
    return [
        *GPUS,
        series("servescope_engine_gpu_info", second, pid_values),
        _tokens_series(_tokens(60_000, tokens_after)),
        _running_series(_running(50, 50)),
    ]


SECOND_PID_ALL_ALONG = case(
    f"{ALERT}: slower at the same batch, two processes on one GPU",
    _second_pid(f"1x{END}", 42_000),
    check(ALERT, f"{CHANGE - 10}m"),
    check(ALERT, f"{CHANGE + 40}m"),
    check(ALERT, f"{CHANGE + 90}m", firing(ALERT, ENGINE, DESCRIPTION)),
)
SECOND_PID_STARTS = case(
    f"{ALERT}: a second process on one GPU, same speed",
    _second_pid(f"_x{CHANGE} 1x{END - CHANGE}", 60_000),
    check(ALERT, f"{CHANGE + 90}m"),
    check(ALERT, f"{CHANGE + 300}m"),
)
CASES = [SLOWER, LIGHTER, NO_HISTORY, SECOND_PID_ALL_ALONG, SECOND_PID_STARTS]


@pytest.mark.e2e
@pytest.mark.slow
def test_throughput_below_baseline(tmp_path: Path) -> None:
    run_promtool(CASES, tmp_path, evaluation_interval="15m")


# The PodMonitor topology: the engine's own vllm:* series (instance is the node, endpoint the pod's URL)
# and the kubelet's allocation of its pod's two GPUs. The pod is the unit: the alert's keys and its
# description are the pod's labels, none left empty.
POD = {"namespace": "llm", "pod": "ds-a", "container": "vllm"}
POD_ENGINE = {
    "job": "vllm",
    "instance": "node-a",
    **POD,
    "endpoint": "http://10.1.0.5:8000/metrics",
    "model_name": "deepseek",
    "engine": "0",
}
POD_KEYS = {k: POD_ENGINE[k] for k in ("instance", "namespace", "pod", "model_name", "endpoint")}
POD_DESCRIPTION = (
    "deepseek pod llm/ds-a on node-a has generated over 10% fewer tokens per second per GPU than a day ago "
    "(and a week ago) for 1h, with the same running batch: the engine got slower, not the traffic lighter."
)
POD_LINKS = {
    "runbook_url": f"{CONFIG.runbook_base_url}/runbooks/{ALERT}?instance=node-a&namespace=llm&pod=ds-a"
    "&model_name=deepseek&endpoint=http%3A%2F%2F10.1.0.5%3A8000%2Fmetrics",
    "dashboard_url": f"{CONFIG.dashboard_base_url}/d/servescope-serving-slo?var-model_name=deepseek",
}
POD_GPUS = [
    series(
        "servescope_gpu_pod_info",
        {
            "job": "servescope",
            "instance": "node-a",
            "hostname": "node-a",
            "gpu": str(i),
            "uuid": f"GPU-000{i}",
            **POD,
        },
        f"1x{END}",
    )
    for i in (0, 1)
]


def _pod_inputs(tokens_after: int, running_after: int) -> list[dict[str, str]]:
    """The pod's GPUs, and its engine's vllm:* series changing at CHANGE."""
    return [
        *POD_GPUS,
        series("vllm:generation_tokens_total", POD_ENGINE, _tokens(60_000, tokens_after)),
        series("vllm:num_requests_running", POD_ENGINE, _running(50, running_after)),
    ]


POD_SLOWER = case(
    f"{ALERT}: slower at the same batch, PodMonitor topology",
    _pod_inputs(42_000, 50),
    check(ALERT, f"{CHANGE - 10}m"),
    check(ALERT, f"{CHANGE + 40}m"),
    check(
        ALERT,
        f"{CHANGE + 90}m",
        {
            "exp_labels": {**POD_KEYS, "severity": "warning", **BUNDLE_LABEL},
            "exp_annotations": {
                "summary": ALERTS[ALERT].summary,
                "description": POD_DESCRIPTION,
                **POD_LINKS,
            },
        },
    ),
)
POD_LIGHTER = case(
    f"{ALERT}: lighter traffic, same speed per request, PodMonitor topology",
    _pod_inputs(36_000, 30),
    check(ALERT, f"{CHANGE + 90}m"),
    check(ALERT, f"{CHANGE + 300}m"),
)


@pytest.mark.e2e
@pytest.mark.slow
def test_throughput_below_baseline_podmonitor(tmp_path: Path) -> None:
    rules = tmp_path / "rules-podmonitor.yaml"
    pod_config = AlertsConfig(engine_topology="podmonitor")
    rules.write_text(yaml.safe_dump(rule_file(pod_config), sort_keys=False, width=120))
    run_promtool([POD_SLOWER, POD_LIGHTER], tmp_path, evaluation_interval="15m", rules=rules)
