"""The Alertmanager configuration, checked offline by the real amtool: the file and its routes.

Its inhibitions are checked structurally in test_alertmanager_inhibit_rules.py and against a real
Alertmanager in test_alertmanager_inhibitions.py (amtool cannot evaluate them).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from servescope.bundle.alerts.alertmanager import HEARTBEAT, NULL, PAGER, TICKET, WEBHOOK
from servescope.bundle.alerts.bundle import write
from servescope.bundle.alerts.model import BUNDLE_LABEL, WATCHDOG
from servescope.core.config import AlertsConfig
from servescope.runbooks.webhook import WEBHOOK_PATH
from tests.alerts.alertmanager import ALERTS, BUILT, CONFIG, GPU0, amtool

BY_SEVERITY = {"critical": PAGER, "warning": TICKET, "info": NULL}


# --- amtool check-config --------------------------------------------------------------------------------


@pytest.mark.e2e
def test_built_config_is_valid() -> None:
    result = amtool("check-config", str(BUILT))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    assert f"{len(yaml.safe_load(BUILT.read_text())['inhibit_rules'])} inhibit rules" in result.stdout


def test_default_webhook_url_is_where_the_runbook_service_listens() -> None:
    # Alertmanager posts to webhook_url; the runbook service answers on WEBHOOK_PATH only.
    assert urlsplit(CONFIG.webhook_url).path == WEBHOOK_PATH
    assert urlsplit(CONFIG.webhook_url).port == urlsplit(CONFIG.runbook_base_url).port


@pytest.mark.e2e
def test_config_with_another_webhook_is_valid(tmp_path: Path) -> None:
    config = AlertsConfig(
        webhook_url="https://runbooks.example.com:8443/api/v1/alertmanager",
        webhook_credentials_file="/run/secrets/runbooks-token",
    )
    write(tmp_path, config)
    path = tmp_path / "alertmanager.yaml"
    result = amtool("check-config", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    built, other = yaml.safe_load(BUILT.read_text()), yaml.safe_load(path.read_text())
    (webhook,) = next(r for r in other["receivers"] if r["name"] == WEBHOOK)["webhook_configs"]
    assert webhook["url"] == config.webhook_url
    assert webhook["http_config"]["authorization"]["credentials_file"] == config.webhook_credentials_file
    # Only the receiver's endpoint moves: the routes and the inhibitions are the built ones.
    assert (other["route"], other["inhibit_rules"]) == (built["route"], built["inhibit_rules"])


@pytest.mark.e2e
def test_check_config_rejects_a_broken_file(tmp_path: Path) -> None:
    """The check above means something: amtool fails a route to a receiver that does not exist."""
    config = yaml.safe_load(BUILT.read_text())
    config["route"]["routes"][1]["receiver"] = "nobody"
    path = tmp_path / "alertmanager.yaml"
    path.write_text(yaml.safe_dump(config))
    result = amtool("check-config", str(path))
    assert result.returncode != 0
    assert "nobody" in result.stdout + result.stderr


# --- amtool config routes test --------------------------------------------------------------------------


def routes(labels: dict[str, str], expected: list[str]) -> subprocess.CompletedProcess[str]:
    """`amtool config routes test --verify.receivers`: exits non-zero when the receivers differ."""
    return amtool(
        "config",
        "routes",
        "test",
        f"--config.file={BUILT}",
        f"--verify.receivers={','.join(expected)}",
        *(f"{key}={value}" for key, value in labels.items()),
    )


OURS = dict(BUNDLE_LABEL)
# Alerts of the rest of the cluster (kube-prometheus-stack's): the bundle's routes must leave them to the
# routes after them, so in the bundle's own file they end at its root's default receiver, nowhere else.
FOREIGN = {"job": "kube-state-metrics", "namespace": "kube-system", "node": "node-a"}


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (
            {"alertname": "ServescopeTtftSloBurnFast", "severity": "critical", **OURS, "model_name": "m"},
            [WEBHOOK, PAGER],
        ),
        ({"alertname": "ServescopeGpuSaturated", "severity": "warning", **OURS, **GPU0}, [WEBHOOK, TICKET]),
        ({"alertname": "ServescopeGpuPowerThrottling", "severity": "info", **OURS, **GPU0}, [WEBHOOK, NULL]),
        ({"alertname": WATCHDOG, "severity": "info", **OURS}, [WEBHOOK, HEARTBEAT]),
        ({"alertname": "KubeNodeNotReady", "severity": "critical", **FOREIGN}, [NULL]),
        ({"alertname": "KubePodCrashLooping", "severity": "warning", **FOREIGN}, [NULL]),
        ({"alertname": "Watchdog", "severity": "none", "prometheus": "monitoring/kps"}, [NULL]),
        # A foreign alert that happens to reuse a bundle alert's name is still not the bundle's.
        ({"alertname": "ServescopeGpuLost", "severity": "critical", **GPU0}, [NULL]),
        ({"alertname": "NoSeverity"}, [NULL]),
    ],
    ids=[
        "critical",
        "warning",
        "info",
        "watchdog",
        "foreign-critical",
        "foreign-warning",
        "foreign-watchdog",
        "foreign-same-name",
        "no-severity",
    ],
)
def test_routes(labels: dict[str, str], expected: list[str]) -> None:
    result = routes(labels, expected)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ",".join(expected)


def test_every_route_matches_the_bundle_label_only() -> None:
    """Pasted first under another root route, no route of the bundle may match an alert not its own."""
    built = yaml.safe_load(BUILT.read_text())["route"]["routes"]
    assert built
    for route in built:
        assert 'bundle="servescope"' in route["matchers"], route


def test_every_route_groups_on_its_own() -> None:
    """Pasted under another root route, no route inherits that root's grouping: the pager groups by model
    (one notification thread per model's incident, one for the fleet's blindness), tickets by alert, node and
    model (a busy node's eight GPUs are one ticket)."""
    routes = {r["receiver"]: r["group_by"] for r in yaml.safe_load(BUILT.read_text())["route"]["routes"]}
    assert routes == {
        WEBHOOK: ["alertname", "instance", "uuid", "model_name", "engine", "endpoint", "node"],
        HEARTBEAT: ["alertname"],
        PAGER: ["model_name"],
        TICKET: ["alertname", "instance", "model_name"],
        NULL: ["alertname"],
    }


def test_the_fleet_labels_lead_every_grouping() -> None:
    from servescope.bundle.alerts.alertmanager import routes

    assert all(route["group_by"][0] == "cluster" for route in routes(AlertsConfig(fleet_by=("cluster",))))


@pytest.mark.e2e
def test_routes_verification_fails_on_a_mismatch() -> None:
    """--verify.receivers really compares: a warning does not page."""
    result = routes({"alertname": "ServescopeGpuSaturated", "severity": "warning", **OURS}, [WEBHOOK, PAGER])
    assert result.returncode != 0
    assert "did not match" in result.stdout + result.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(ALERTS))
def test_every_alert_reaches_the_runbook_service(name: str) -> None:
    alert = ALERTS[name]
    person = HEARTBEAT if name == WATCHDOG else BY_SEVERITY[alert.severity]
    labels = {"alertname": name, "severity": alert.severity, **BUNDLE_LABEL, **alert.labels}
    result = routes(labels, [WEBHOOK, person])
    assert result.returncode == 0, result.stdout + result.stderr
