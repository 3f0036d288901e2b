"""Alertmanager configuration: the route tree, the receivers and the inhibitions of the bundle."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servescope.alerts.config import AlertsConfig
from servescope.alerts.model import Alert

WEBHOOK = "servescope-runbooks"
PAGER, TICKET, HEARTBEAT, NULL = "pager", "ticket", "heartbeat", "null"
COMBINED = "ServescopeGpuSaturatedKvPressure"
# What identifies one thing that is wrong: alerts about it are grouped and sent to the runbook service
# together, and one webhook call never mixes two GPUs.
GROUP_BY = ["alertname", "instance", "uuid", "model_name", "engine", "endpoint"]


def inhibit_rules(alerts: Sequence[Alert]) -> list[dict[str, Any]]:
    # The inhibitions as one literal, each with the reason it exists: longer than 40 lines on purpose.
    names = {a.name for a in alerts}
    absent = sorted(n for n in names if n.endswith("Absent"))
    per_exporter = sorted(n for n in names if n in ("ServescopeSourceDown", "ServescopeServingEndpointDown"))
    return [
        # A critical alert about a GPU silences the warnings and infos about the same GPU.
        {
            "source_matchers": ['severity="critical"', 'uuid=~".+"'],
            "target_matchers": ['severity=~"warning|info"'],
            "equal": ["instance", "uuid"],
        },
        # The combined alert says more than its two parts.
        {
            "source_matchers": [f'alertname="{COMBINED}"'],
            "target_matchers": ['alertname="ServescopeGpuSaturated"'],
            "equal": ["instance", "uuid"],
        },
        {
            "source_matchers": [f'alertname="{COMBINED}"'],
            "target_matchers": ['alertname="ServescopeKvCachePressure"'],
            "equal": ["instance", "model_name", "engine", "endpoint"],
        },
        # A lost GPU explains everything else about it (its engine dies, its series go).
        {
            "source_matchers": ['alertname="ServescopeGpuLost"'],
            "target_matchers": ['alertname!="ServescopeGpuLost"'],
            "equal": ["instance", "uuid"],
        },
        # An exporter that cannot be scraped explains its own sources' failures (same instance: an
        # exporter down on one node must not hide a source down on another) ...
        {
            "source_matchers": ['alertname="ServescopeExporterDown"'],
            "target_matchers": [f'alertname=~"{"|".join(per_exporter)}"'],
            "equal": ["job", "instance"],
        },
        # ... and the absence of its series (absent() alerts carry only the selector's labels: job).
        {
            "source_matchers": ['alertname="ServescopeExporterDown"'],
            "target_matchers": [f'alertname=~"{"|".join(absent)}"'],
            "equal": ["job"],
        },
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
            "routes": [
                # Every alert reaches the runbook service first; `continue` lets it go on to a person.
                {
                    "receiver": WEBHOOK,
                    "matchers": ['alertname=~".+"'],
                    "group_wait": "10s",
                    "group_interval": "1m",
                    "repeat_interval": "1h",
                    "continue": True,
                },
                # A dead man's switch wants the heartbeat every minute: group_interval bounds repeats too.
                {
                    "receiver": HEARTBEAT,
                    "matchers": ['alertname="Watchdog"'],
                    "group_interval": "1m",
                    "repeat_interval": "1m",
                },
                {"receiver": PAGER, "matchers": ['severity="critical"']},
                {"receiver": TICKET, "matchers": ['severity="warning"']},
                {"receiver": NULL, "matchers": ['severity="info"']},
            ],
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
