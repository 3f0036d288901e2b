"""Alertmanager's side of the webhook tests: its token, its notifications (version 4), posting them."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def alert(
    status: str = "firing",
    fingerprint: str = "a1b2c3d4e5f60718",
    starts_at: str = "2025-03-01T10:00:00.123Z",
    **labels: str,
) -> dict[str, Any]:
    return {
        "status": status,
        "labels": {"alertname": "TestAlert", "severity": "warning", "gpu": "0", **labels},
        "annotations": {"summary": "GPU 0 saturated", "runbook_url": "https://example/TestAlert"},
        "startsAt": starts_at,
        "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2025-03-01T10:30:00Z",
        "generatorURL": "http://prometheus:9090/graph?g0.expr=up",
        "fingerprint": fingerprint,
    }


def payload(*alerts: dict[str, Any], status: str = "firing") -> dict[str, Any]:
    return {
        "version": "4",
        "groupKey": '{}/{alertname=~".+"}:{alertname="TestAlert", instance="node-a:9108"}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "servescope-runbooks",
        "groupLabels": {"alertname": "TestAlert", "instance": "node-a:9108"},
        "commonLabels": {"alertname": "TestAlert", "severity": "warning"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "notification_reason": "new_alert",
        "alerts": list(alerts) or [alert(status)],
    }


def post(client: TestClient, body: Any, headers: dict[str, str] | None = None) -> Any:
    return client.post("/alertmanager/webhook", json=body, headers=AUTH if headers is None else headers)
