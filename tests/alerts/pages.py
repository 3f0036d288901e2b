"""What the on-call engineer would see, stated on the `ALERTS` series: which alerts fire, which page, what
they name, and that a page fires without a gap; and the series of a quiet, healthy node to start from.

The checks are PromQL cases (`promql_expr_test`) promtool evaluates on the ALERTS series the rules wrote:
an exact list of firing alerts, labels and all, fails on an extra alert as much as on a missing one.
"""

from __future__ import annotations

import re
from typing import Any

from bench.quality.rule_engine import values
from servescope.bundle.alerts.model import BUNDLE_LABEL, WATCHDOG
from tests.alerts.promtool import ALERTS, GPU, TARGET, series

KSM_TARGET = {"job": "kube-state-metrics", "instance": "kube-state-metrics:8080"}


def _alert(name: str, labels: dict[str, str]) -> str:
    found = {
        "__name__": "ALERTS",
        "alertname": name,
        "alertstate": "firing",
        **BUNDLE_LABEL,
        "severity": ALERTS[name].severity,
        **ALERTS[name].labels,
        **labels,
    }
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(found.items()) if k != "__name__" and v)
    return f"ALERTS{{{inner}}}"


def firing_only(at: str, *alerts: tuple[str, dict[str, str]]) -> dict[str, Any]:
    """A PromQL check: at `at`, exactly `alerts` ((name, labels) pairs) fire, besides the Watchdog."""
    return {
        "expr": f'ALERTS{{alertstate="firing", alertname!="{WATCHDOG}"}}',
        "eval_time": at,
        "exp_samples": [{"labels": _alert(name, labels), "value": 1} for name, labels in alerts],
    }


def pages_only(at: str, *alerts: tuple[str, dict[str, str]]) -> dict[str, Any]:
    """A PromQL check: at `at`, exactly `alerts` page (fire with severity critical)."""
    return {
        "expr": 'ALERTS{alertstate="firing", severity="critical"}',
        "eval_time": at,
        "exp_samples": [{"labels": _alert(name, labels), "value": 1} for name, labels in alerts],
    }


def never_paged(at: str, span: str) -> dict[str, Any]:
    """A PromQL check: no page was even pending at any evaluation of the `span` up to `at`."""
    return {
        "expr": f'max_over_time(ALERTS{{severity="critical"}}[{span}])',
        "eval_time": at,
        "exp_samples": [],
    }


def nothing_fired(at: str, span: str) -> dict[str, Any]:
    """A PromQL check: no alert but the Watchdog fired at any evaluation of the `span` up to `at`."""
    return {
        "expr": f'max_over_time(ALERTS{{alertstate="firing", alertname!="{WATCHDOG}"}}[{span}])',
        "eval_time": at,
        "exp_samples": [],
    }


def fired_throughout(name: str, labels: dict[str, str], at: str, span: str, steps: int) -> dict[str, Any]:
    """A PromQL check: `name` on `labels` fired at each of the `steps` evaluations of the `span` up to
    `at`: one page, not one per gap in the scrapes."""
    return {
        "expr": f'count_over_time(ALERTS{{alertname="{name}", alertstate="firing"}}[{span}])',
        "eval_time": at,
        "exp_samples": [{"labels": _alert(name, labels).replace("ALERTS", "", 1), "value": steps}],
    }


def quiet_node(minutes: int, exporter: dict[str, str] = TARGET) -> list[dict[str, str]]:
    """A node whose exporter answers, with a GPU and its derived series, and kube-state-metrics there:
    none of the absent-series or blindness alerts fires."""
    every = f"1x{minutes}"
    return [
        series("up", exporter, every),
        series("servescope_gpu_up", {**GPU, **exporter}, every),
        series("servescope_gpu_memory_leak_suspected", {**GPU, **exporter}, f"0x{minutes}"),
        series("kube_node_info", {**KSM_TARGET, "node": "node-a"}, every),
        series(
            "kube_node_status_capacity", {**KSM_TARGET, "node": "node-a", "resource": "nvidia_com_gpu"}, every
        ),
    ]


def sampled(name: str, labels: dict[str, str], per_step: list[float | None]) -> dict[str, str]:
    """An input series from one value per step (None: no sample; the first after a value is a staleness
    marker, as Prometheus writes when a series goes)."""
    return series(name, labels, values(per_step))


_TOKEN = re.compile(
    r"^(?P<start>_|stale|[-+]?[0-9.eE]+|[-+]?Inf|NaN)(?:(?P<sign>[-+])(?P<step>[0-9.eE]+))?(?:x(?P<n>\d+))?$"
)


def expand(notation: str) -> list[str]:
    """promtool's expanding notation (`1x3`, `0+10x5`, `_x2`, `stale`) as one value per step."""
    steps: list[str] = []
    for token in notation.split():
        match = _TOKEN.match(token)
        if match is None:
            raise ValueError(f"{token!r} is not promtool's expanding notation")
        start, sign, step, n = match.group("start", "sign", "step", "n")
        if start in ("_", "stale"):
            steps += [start] * (int(n) if n else 1)
            continue
        count = int(n) + 1 if n else 1
        delta = float(step or 0) * (-1 if sign == "-" else 1)
        steps += [start if not delta else repr(float(start) + delta * i) for i in range(count)]
    return steps
