"""Alertmanager configuration: the route tree, the receivers and the inhibitions of the bundle."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servescope.bundle.alerts.model import BUNDLE_LABEL, WATCHDOG, Alert
from servescope.core.config import AlertsConfig

WEBHOOK = "servescope-runbooks"
PAGER, TICKET, HEARTBEAT, NULL = "pager", "ticket", "heartbeat", "null"
COMBINED = "ServescopeGpuSaturatedKvPressure"
HURTING = "ServescopeKvPressureHurtingRequests"
# Critical alerts that say a GPU itself is broken: they explain every warning about it. The load-based
# alerts are not among them: a saturated GPU must not hide its thermal, NVLink or row-remap warnings,
# often the cause of the load.
HARDWARE = (
    "ServescopeGpuLost",
    "ServescopeGpuXidCritical",
    "ServescopeGpuEccUncorrectable",
    "ServescopeGpuRowRemapFailed",
)
MEMORY_WARNINGS = (
    "ServescopeGpuMemoryLeakSuspected",
    "ServescopeGpuMemoryHeadroomLow",
    "ServescopeEngineOverMemoryBudget",
)
ENGINE_EQUAL = ["instance", "model_name", "engine", "endpoint"]
GPU_EQUAL = ["instance", "uuid"]
# What identifies one thing that is wrong: alerts about it are grouped and sent to the runbook service
# together, and one webhook call never mixes two GPUs.
GROUP_BY = ["alertname", "instance", "uuid", "model_name", "engine", "endpoint"]
PAGER_GROUP_BY = ["alertname", "hostname"]


def _names(names: Sequence[str]) -> str:
    return f'alertname=~"{"|".join(sorted(names))}"' if len(names) > 1 else f'alertname="{names[0]}"'


def _inhibit(sources: Sequence[str], targets: Sequence[str], equal: list[str]) -> dict[str, Any]:
    """An inhibition between alerts of the bundle only (both sides carry its label)."""
    return {"source_matchers": _ours(_names(sources)), "target_matchers": _ours(*targets), "equal": equal}


def inhibit_rules(alerts: Sequence[Alert]) -> list[dict[str, Any]]:
    # The inhibitions as one literal, each with the reason it exists: longer than 40 lines on purpose.
    names = {a.name for a in alerts}
    p99 = sorted(n for n in names if n.endswith("P99High"))
    rules = [
        # A broken GPU explains the warnings and infos about it (engine alerts carry no uuid: they stay).
        _inhibit(HARDWARE, ['severity=~"warning|info"'], GPU_EQUAL),
        # A lost GPU explains the other critical alerts about it too (its XID, its ECC).
        _inhibit(["ServescopeGpuLost"], ['alertname!="ServescopeGpuLost"'], GPU_EQUAL),
        _inhibit(["ServescopeGpuMemoryExhaustionSoon"], [_names(MEMORY_WARNINGS)], GPU_EQUAL),
        # The combined alerts say more than their parts.
        _inhibit([COMBINED], ['alertname="ServescopeGpuSaturated"'], GPU_EQUAL),
        _inhibit([COMBINED, HURTING], ['alertname="ServescopeKvCachePressure"'], ENGINE_EQUAL),
        # The page is per engine (no GPU labels): it silences the combined warning on each of its GPUs,
        # which in turn silences those GPUs' saturation warnings.
        _inhibit([HURTING], [f'alertname="{COMBINED}"'], ENGINE_EQUAL),
        # A fast burn says more than the slow burn and the P99 of the same model.
        _inhibit(
            ["ServescopeTtftSloBurnFast"], [_names(["ServescopeTtftSloBurnSlow", *p99])], ["model_name"]
        ),
        _inhibit(["ServescopeE2eSloBurnFast"], ['alertname="ServescopeE2eSloBurnSlow"'], ["model_name"]),
        # An exporter that cannot be scraped explains its own sources' failures (same instance: an
        # exporter down on one node must not hide a source down on another). Not the absent-series
        # alerts: they are fleet-wide, and one node down for maintenance must not hide them.
        _inhibit(
            ["ServescopeExporterDown"],
            [_names(["ServescopeServingEndpointDown", "ServescopeSourceDown", "ServescopeSourceStale"])],
            ["job", "instance"],
        ),
        # NVML failing on the whole node explains its NVML source failing.
        _inhibit(
            ["ServescopeGpuNodeNvmlLost"],
            [_names(["ServescopeSourceDown", "ServescopeSourceStale"]), 'source="nvml"'],
            ["instance"],
        ),
    ]
    return rules


def _ours(*matchers: str) -> list[str]:
    """Matchers of a bundle route: the bundle's label first, so no other alert of the cluster matches."""
    return [*(f'{key}="{value}"' for key, value in BUNDLE_LABEL.items()), *matchers]


def routes() -> list[dict[str, Any]]:
    """The bundle's routes; each matches the bundle's own alerts only, so they can sit first under any
    root route without taking the cluster's other alerts (KubeNodeNotReady, kube-prometheus's Watchdog)."""
    return [
        # Every alert of the bundle reaches the runbook service first; `continue` lets it go on to a person.
        {
            "receiver": WEBHOOK,
            "matchers": _ours(),
            "group_wait": "10s",
            "group_interval": "1m",
            "repeat_interval": "1h",
            "continue": True,
        },
        # A dead man's switch wants the heartbeat every minute: group_interval bounds repeats too.
        {
            "receiver": HEARTBEAT,
            "matchers": _ours(f'alertname="{WATCHDOG}"'),
            "group_interval": "1m",
            "repeat_interval": "1m",
        },
        # One page per alert and node: an HGX node event on eight GPUs is one page, not eight.
        {"receiver": PAGER, "matchers": _ours('severity="critical"'), "group_by": PAGER_GROUP_BY},
        {"receiver": TICKET, "matchers": _ours('severity="warning"')},
        {"receiver": NULL, "matchers": _ours('severity="info"')},
    ]


def alertmanager_config(cfg: AlertsConfig, alerts: Sequence[Alert]) -> dict[str, Any]:
    # Alertmanager's configuration as one literal, shaped as the file it becomes: longer than 40 lines on
    # purpose.
    return {
        "global": {"resolve_timeout": "5m"},
        "route": {
            "receiver": NULL,
            "group_by": GROUP_BY,
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": routes(),
        },
        "inhibit_rules": inhibit_rules(alerts),
        "receivers": [
            {"name": NULL},
            {
                "name": WEBHOOK,
                "webhook_configs": [
                    {
                        "url": cfg.webhook_url,
                        "send_resolved": True,
                        "max_alerts": 0,
                        "http_config": {
                            "authorization": {
                                "type": "Bearer",
                                "credentials_file": cfg.webhook_credentials_file,
                            }
                        },
                    }
                ],
            },
            # Fill these in with your pager (PagerDuty, Opsgenie), ticket queue and dead man's switch.
            {"name": PAGER},
            {"name": TICKET},
            {"name": HEARTBEAT},
        ],
    }
