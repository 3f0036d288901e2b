"""Alertmanager configuration: the route tree, the receivers and the inhibitions of the bundle.

One page per incident: the pager groups by model (with the fleet's labels), so every page about one
model is one notification thread however its alerts come and go, and the fleet's blindness pages (no
model) are one more; a page mutes the tickets that explain it (the causes on that model, the exporters
of a blind fleet), which stay visible in Alertmanager as inhibited. Every route sets its own `group_by`:
merged under another configuration's root route, none inherits that root's grouping.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servescope.bundle.alerts.alertmanager_inhibit import inhibit_rules
from servescope.bundle.alerts.model import BUNDLE_LABEL, WATCHDOG, Alert
from servescope.core.config import AlertsConfig

WEBHOOK = "servescope-runbooks"
PAGER, TICKET, HEARTBEAT, NULL = "pager", "ticket", "heartbeat", "null"
# What identifies one thing that is wrong: alerts about it are grouped and sent to the runbook service
# together (one incident there), and one webhook call never mixes two GPUs or two nodes.
WEBHOOK_GROUP_BY = ("alertname", "instance", "uuid", "model_name", "engine", "endpoint", "node")
# One page per model: the symptom, its explanation and a later page of the same model join one
# notification thread (the pager's incident); the blindness pages have no model and are one more.
PAGER_GROUP_BY = ("model_name",)
# One ticket per alert and node (or model, for a model's alerts): a busy node's eight saturated GPUs
# are one ticket, the GPU nodes without an exporter one ticket that lists them.
TICKET_GROUP_BY = ("alertname", "instance", "model_name")


def group_by(cfg: AlertsConfig, labels: Sequence[str]) -> list[str]:
    """A route's grouping: the fleet's labels (fleet_by, e.g. cluster) first, then `labels`."""
    return [*cfg.fleet_by, *(label for label in labels if label not in cfg.fleet_by)]


def _ours(*matchers: str) -> list[str]:
    """Matchers of a bundle route: the bundle's label first, so no other alert of the cluster matches."""
    return [*(f'{key}="{value}"' for key, value in BUNDLE_LABEL.items()), *matchers]


def routes(cfg: AlertsConfig | None = None) -> list[dict[str, Any]]:
    """The bundle's routes; each matches the bundle's own alerts only, so they can sit first under any
    root route without taking the cluster's other alerts (KubeNodeNotReady, kube-prometheus's Watchdog),
    and each sets its own group_by, so that such a root's grouping is never inherited."""
    cfg = cfg or AlertsConfig()
    return [
        # Every alert of the bundle reaches the runbook service first; `continue` lets it go on to a person.
        {
            "receiver": WEBHOOK,
            "matchers": _ours(),
            "group_by": group_by(cfg, WEBHOOK_GROUP_BY),
            "group_wait": "10s",
            "group_interval": "1m",
            "repeat_interval": "1h",
            "continue": True,
        },
        # A dead man's switch wants the heartbeat every minute: group_interval bounds repeats too.
        {
            "receiver": HEARTBEAT,
            "matchers": _ours(f'alertname="{WATCHDOG}"'),
            "group_by": group_by(cfg, ("alertname",)),
            "group_interval": "1m",
            "repeat_interval": "1m",
        },
        {
            "receiver": PAGER,
            "matchers": _ours('severity="critical"'),
            "group_by": group_by(cfg, PAGER_GROUP_BY),
        },
        {
            "receiver": TICKET,
            "matchers": _ours('severity="warning"'),
            "group_by": group_by(cfg, TICKET_GROUP_BY),
        },
        {"receiver": NULL, "matchers": _ours('severity="info"'), "group_by": group_by(cfg, ("alertname",))},
    ]


def alertmanager_config(cfg: AlertsConfig, alerts: Sequence[Alert]) -> dict[str, Any]:
    # Alertmanager's configuration as one literal, shaped as the file it becomes: longer than 40 lines on
    # purpose.
    return {
        "global": {"resolve_timeout": "5m"},
        "route": {
            "receiver": NULL,
            "group_by": group_by(cfg, WEBHOOK_GROUP_BY),
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": routes(cfg),
        },
        "inhibit_rules": inhibit_rules(cfg, alerts),
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
