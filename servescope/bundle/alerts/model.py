"""What a rule is, and how an alert's annotations and links are written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servescope.core.config import AlertsConfig

SEVERITIES = ("critical", "warning", "info")
# Every rule of the bundle carries this label: the bundle's Alertmanager routes match on it, so they never
# take another alert of the cluster (kube-prometheus's own Watchdog, KubeNodeNotReady) away from its routes.
BUNDLE_LABEL = {"bundle": "servescope"}
WATCHDOG = "ServescopeWatchdog"

# Dashboards the links point at: uids are "servescope-" + the dashboard's file name (dashboards/).
DASHBOARDS = {
    "gpu": "servescope-fleet",
    "memory": "servescope-gpu-memory",
    "interconnect": "servescope-interconnect",
    "serving": "servescope-serving-slo",
    "slo": "servescope-serving-slo",
    "exporter": "servescope-health",
    "capacity": "servescope-load",
}
# The template variables each dashboard defines (dashboards/common.py `variables`): a link passes only
# those, as Grafana ignores (and users trip over) a `var-` the dashboard lacks.
DASHBOARD_VARIABLES = {
    "gpu": ("hostname", "gpu"),
    "memory": ("hostname", "gpu"),
    "interconnect": ("hostname", "gpu"),
    "serving": ("model_name",),
    "slo": ("model_name",),
    "exporter": (),
    "capacity": (),
}
GPU_KEYS = ("instance", "hostname", "gpu", "uuid")
ENGINE_KEYS = ("instance", "model_name", "engine", "endpoint")


def record_name(level: str, metric: str, operations: str) -> str:
    """A recording rule's name, `<level>:servescope_<metric>:<operations>` (Prometheus' convention)."""
    return f"{level}:servescope_{metric}:{operations}"


@dataclass(frozen=True)
class Alert:
    """One alerting rule; `keys` are the labels that identify what is wrong (runbook and dashboard links)."""

    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str
    keys: tuple[str, ...] = ()
    dashboard: str = "exporter"
    labels: dict[str, str] = field(default_factory=dict)
    keep_firing_for: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"alert {self.name}: severity {self.severity!r} not in {SEVERITIES}")
        if self.dashboard not in DASHBOARDS:
            raise ValueError(f"alert {self.name}: unknown dashboard {self.dashboard!r}")

    def runbook_url(self, config: AlertsConfig) -> str:
        return f"{config.runbook_base_url}/runbooks/{self.name}{_query(self.keys)}"

    @property
    def dashboard_keys(self) -> tuple[str, ...]:
        """The alert's labels that the linked dashboard has a variable for."""
        return tuple(key for key in self.keys if key in DASHBOARD_VARIABLES[self.dashboard])

    def dashboard_url(self, config: AlertsConfig) -> str:
        keys = self.dashboard_keys
        params = tuple(f"var-{key}" for key in keys)
        return f"{config.dashboard_base_url}/d/{DASHBOARDS[self.dashboard]}{_query(keys, params)}"

    def render(self, config: AlertsConfig) -> dict[str, Any]:
        kept = {"keep_firing_for": self.keep_firing_for} if self.keep_firing_for else {}
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.for_,
            **kept,
            "labels": {"severity": self.severity, **BUNDLE_LABEL, **self.labels},
            "annotations": {
                "summary": self.summary,
                "description": self.description,
                "runbook_url": self.runbook_url(config),
                "dashboard_url": self.dashboard_url(config),
            },
        }


def _query(keys: tuple[str, ...], names: tuple[str, ...] | None = None) -> str:
    """`?a={{ $labels.a | urlquery }}&...`: label values are escaped when the alert is rendered."""
    if not keys:
        return ""
    pairs = zip(names or keys, keys, strict=True)
    return "?" + "&".join(f"{name}={{{{ $labels.{key} | urlquery }}}}" for name, key in pairs)


@dataclass(frozen=True)
class Record:
    """A recording rule, named level:metric:operations."""

    name: str
    expr: str

    def render(self, config: AlertsConfig) -> dict[str, Any]:
        return {"record": self.name, "expr": self.expr}


@dataclass(frozen=True)
class Group:
    name: str
    rules: tuple[Alert | Record, ...]
    interval: str | None = None

    def render(self, config: AlertsConfig) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.interval:
            out["interval"] = self.interval
        out["rules"] = [rule.render(config) for rule in self.rules]
        return out
