"""The bundle's inhibitions: a page mutes the tickets that explain it, a broken GPU the warnings about it.

Muted is not lost: Alertmanager lists an inhibited alert with the alert that mutes it, and sends it once
the page resolves if it still fires (the cause outlives the incident: it becomes a ticket then).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servescope.bundle.alerts.model import BUNDLE_LABEL, Alert
from servescope.core.config import AlertsConfig

COMBINED = "ServescopeGpuSaturatedKvPressure"
HURTING = "ServescopeKvPressureHurtingRequests"
ENDPOINT_DOWN = "ServescopeServingEndpointDown"
BLIND = ("ServescopeMonitoringBlind", "ServescopeExporterTargetsAbsent")
# What a blind fleet explains: its exporters, their sources and series, the nodes and engines unseen, the
# agent shards that stopped sending them.
BLIND_EXPLAINS = (
    "ServescopeExporterDown",
    "ServescopeSourceDown",
    "ServescopeSourceStale",
    "ServescopeGpuMetricsAbsent",
    "ServescopeServingMetricsAbsent",
    "ServescopeDerivedMetricsAbsent",
    "ServescopeGpuNodeWithoutExporter",
    "ServescopeAgentShardSilent",
    ENDPOINT_DOWN,
)
# Alerts that say a GPU itself is broken: they explain every other warning about it. The load-based
# alerts are not among them: a saturated GPU must not hide its thermal, NVLink or row-remap warnings,
# often the cause of the load.
HARDWARE = (
    "ServescopeGpuLost",
    "ServescopeGpuXidCritical",
    "ServescopeGpuEccUncorrectable",
    "ServescopeGpuRowRemapFailed",
)
NOT_HARDWARE = f'alertname!~"{"|".join(sorted(HARDWARE))}"'
MEMORY_WARNINGS = (
    "ServescopeGpuMemoryLeakSuspected",
    "ServescopeGpuMemoryHeadroomLow",
    "ServescopeEngineOverMemoryBudget",
)
ENGINE_EQUAL = ["instance", "model_name", "engine", "endpoint"]
GPU_EQUAL = ["instance", "uuid"]


def names(alerts: Sequence[str]) -> str:
    """An alertname matcher for `alerts` (sorted)."""
    return f'alertname=~"{"|".join(sorted(alerts))}"' if len(alerts) > 1 else f'alertname="{alerts[0]}"'


def _ours(*matchers: str) -> list[str]:
    return [*(f'{key}="{value}"' for key, value in BUNDLE_LABEL.items()), *matchers]


def _inhibit(sources: Sequence[str], targets: Sequence[str], equal: list[str]) -> dict[str, Any]:
    """An inhibition between alerts of the bundle only (both sides carry its label)."""
    return {
        "source_matchers": _ours(names(sources)),
        "target_matchers": _ours(*targets),
        "equal": list(equal),
    }


def model_pages(alerts: Sequence[Alert]) -> list[str]:
    """The pages about one model: each symptom on the model's SLOs."""
    return sorted(a.name for a in alerts if a.severity == "critical" and "model_name" in a.keys)


def model_tickets(alerts: Sequence[Alert]) -> list[str]:
    """The tickets about a model's engines, endpoints and SLOs: the causes a page of that model explains."""
    return sorted(
        a.name
        for a in alerts
        if a.severity != "critical" and ("model_name" in a.keys or a.name == ENDPOINT_DOWN)
    )


def inhibit_rules(cfg: AlertsConfig, alerts: Sequence[Alert]) -> list[dict[str, Any]]:
    # The inhibitions as one literal, each with the reason it exists: longer than 40 lines on purpose.
    fleet, model = list(cfg.fleet_by), [*cfg.fleet_by, "model_name"]
    return [
        # A page of a model mutes the tickets of that model: the causes it has (KV pressure, queues, an
        # endpoint down, a slow burn) are its explanation, listed in Alertmanager as inhibited by it.
        _inhibit(model_pages(alerts), [names(model_tickets(alerts))], model),
        # The KV page names the engine and its cause: it says more than the burn page of its model.
        _inhibit([HURTING], ['alertname="ServescopeTtftSloBurnFast"'], model),
        # A blind fleet is one page: the exporters down, the series absent, the nodes unseen are its parts.
        _inhibit(BLIND, [names(BLIND_EXPLAINS)], fleet),
        _inhibit([BLIND[1]], [f'alertname="{BLIND[0]}"'], fleet),
        # A broken GPU explains the other warnings and infos about it (engine alerts carry no uuid: they
        # stay); a lost GPU explains its XID and ECC alerts too.
        _inhibit(HARDWARE, ['severity=~"warning|info"', NOT_HARDWARE], GPU_EQUAL),
        _inhibit(["ServescopeGpuLost"], ['alertname!="ServescopeGpuLost"'], GPU_EQUAL),
        _inhibit(["ServescopeGpuMemoryExhaustionSoon"], [names(MEMORY_WARNINGS)], GPU_EQUAL),
        # The combined ticket says more than its parts: the KV pressure of its engine, its node's
        # saturated GPUs (one ticket per node either way).
        _inhibit([COMBINED], ['alertname="ServescopeGpuSaturated"'], ["instance", "hostname"]),
        _inhibit([COMBINED], ['alertname="ServescopeKvCachePressure"'], ENGINE_EQUAL),
        # An exporter that cannot be scraped explains its own sources' failures (same instance: an
        # exporter down on one node must not hide a source down on another).
        _inhibit(
            ["ServescopeExporterDown"],
            [names([ENDPOINT_DOWN, "ServescopeSourceDown", "ServescopeSourceStale"])],
            ["job", "instance"],
        ),
        # NVML failing on the whole node explains its NVML source failing.
        _inhibit(
            ["ServescopeGpuNodeNvmlLost"],
            [names(["ServescopeSourceDown", "ServescopeSourceStale"]), 'source="nvml"'],
            ["instance"],
        ),
    ]
