"""The real amtool and Alertmanager the Alertmanager tests drive, and the labels their alerts carry."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.quality.pager import api
from servescope.bundle.alerts import BUILD_DIR as ALERTS_BUILD
from servescope.bundle.alerts.bundle import all_alerts
from servescope.bundle.alerts.model import BUNDLE_LABEL
from servescope.core.config import AlertsConfig
from tests.support import Child, ChildFailedError, free_port

BUILT = ALERTS_BUILD / "alertmanager.yaml"
RECEIVER = Path(__file__).resolve().parents[2] / "deploy" / "alertmanager-receiver.yaml"
# kube-prometheus-stack's default alertmanager.config (its values.yaml): a root grouped by namespace.
KPS_DEFAULT: dict[str, Any] = {
    "global": {"resolve_timeout": "5m"},
    "route": {
        "receiver": "null",
        "group_by": ["namespace"],
        "group_wait": "30s",
        "group_interval": "5m",
        "repeat_interval": "12h",
        "routes": [{"receiver": "null", "matchers": ['alertname = "Watchdog"']}],
    },
    "receivers": [{"name": "null"}],
    "inhibit_rules": [
        {
            "source_matchers": ['severity = "critical"'],
            "target_matchers": ['severity =~ "warning|info"'],
            "equal": ["namespace", "alertname"],
        }
    ],
}


def merged() -> dict[str, Any]:
    """The snippet merged as its header says: its routes first under the root's, its receivers added (one
    `null` kept), its inhibitions appended."""
    snippet = yaml.safe_load(RECEIVER.read_text())
    config = yaml.safe_load(yaml.safe_dump(KPS_DEFAULT))
    config["route"]["routes"] = [*snippet["route"]["routes"], *config["route"]["routes"]]
    names = {r["name"] for r in config["receivers"]}
    config["receivers"] += [r for r in snippet["receivers"] if r["name"] not in names]
    config["inhibit_rules"] += snippet["inhibit_rules"]
    return config


CONFIG = AlertsConfig()
ALERTS = {alert.name: alert for alert in all_alerts(CONFIG)}
INSTALL = "scripts/install-debian-tools.sh"

TARGET = {"job": "servescope", "instance": "node-a:9108"}
GPU0 = {**TARGET, "hostname": "node-a", "gpu": "0", "uuid": "GPU-0000"}
GPU1 = {**TARGET, "hostname": "node-a", "gpu": "1", "uuid": "GPU-1111"}
NODE_B_GPU = {
    "job": "servescope",
    "instance": "node-b:9108",
    "hostname": "node-b",
    "gpu": "0",
    "uuid": "GPU-2222",
}
ENGINE = {**TARGET, "model_name": "deepseek", "engine": "0", "endpoint": "http://10.0.0.1:8000/metrics"}
ENGINE_ON_GPU0 = {**ENGINE, "gpu": "0", "uuid": "GPU-0000"}
OTHER_ENGINE = {**TARGET, "model_name": "deepseek", "engine": "1", "endpoint": "http://10.0.0.2:8000/metrics"}

Labels = dict[str, str]


def tool(name: str) -> str:
    """The path of a Debian prometheus-alertmanager binary; fails the test when it is not installed."""
    path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if path is None:
        pytest.fail(f"{name} missing: install Debian prometheus-alertmanager ({INSTALL}, run by `make test`)")
    return path


def amtool(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the real amtool with `args`."""
    return subprocess.run([tool("amtool"), *args], capture_output=True, text=True, timeout=60, check=False)


def built() -> dict[str, Any]:
    """The built Alertmanager configuration."""
    document: dict[str, Any] = yaml.safe_load(BUILT.read_text())
    return document


def alert(name: str, labels: Labels) -> Labels:
    """The labels Prometheus would send for alert `name` on `labels`."""
    return {
        "alertname": name,
        "severity": ALERTS[name].severity,
        **BUNDLE_LABEL,
        **ALERTS[name].labels,
        **labels,
    }


@dataclass
class Alertmanager:
    """A running Alertmanager's API v2."""

    url: str

    def request(self, path: str, body: Any = None) -> Any:
        return api(self.url + path, body, timeout=5)

    def fire(self, *labels: Labels, resolved: bool = False) -> None:
        now = datetime.now(UTC)
        ends = now - timedelta(seconds=1) if resolved else now + timedelta(hours=1)
        self.request(
            "/api/v2/alerts",
            [
                {
                    "labels": lset,
                    "annotations": {"summary": "test"},
                    "startsAt": (now - timedelta(minutes=5)).isoformat(),
                    "endsAt": ends.isoformat(),
                }
                for lset in labels
            ],
        )

    def groups(self, receiver: str) -> list[dict[str, Any]]:
        """The receiver's alert groups (their labels: the route's group_by), each alert with its status."""
        return [g for g in self.request("/api/v2/alerts/groups") if g["receiver"]["name"] == receiver]

    def alerts(self) -> dict[frozenset[tuple[str, str]], dict[str, Any]]:
        return {frozenset(a["labels"].items()): a for a in self.request("/api/v2/alerts")}

    def status(self, labels: Labels) -> dict[str, Any]:
        """The status of the alert with exactly `labels`."""
        status: dict[str, Any] = self.alerts()[frozenset(labels.items())]["status"]
        return status

    def resolve_all(self) -> None:
        """Resolve every alert posted so far: the next test starts with nothing active."""
        posted = [dict(labels) for labels in self.alerts()]
        if posted:
            self.fire(*posted, resolved=True)


def _config_for_test(tmp_path: Path, config: dict[str, Any] | None = None) -> Path:
    """The built configuration (or `config`) with every webhook pointed at a closed local port and a token
    file."""
    config = config or built()
    token = tmp_path / "token"
    token.write_text("test-token\n")
    for receiver in config["receivers"]:
        for webhook in receiver.get("webhook_configs", []):
            webhook["url"] = f"http://127.0.0.1:{free_port()}/api/v1/alertmanager"
            webhook["http_config"]["authorization"]["credentials_file"] = str(token)
    path = tmp_path / "alertmanager.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@contextmanager
def running_alertmanager(tmp_path: Path, config: dict[str, Any] | None = None) -> Iterator[Alertmanager]:
    """The real Alertmanager with the built configuration (or `config`) on a loopback port, stopped on
    exit."""
    port = free_port()
    argv = [
        tool("prometheus-alertmanager"),
        f"--config.file={_config_for_test(tmp_path, config)}",
        f"--storage.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
        "--log.level=warn",
    ]
    child = Child("alertmanager", argv, tmp_path / "alertmanager.log")
    child.start()
    try:
        child.wait_ready(f"http://127.0.0.1:{port}/-/ready", timeout=15)
        yield Alertmanager(f"http://127.0.0.1:{port}")
    except ChildFailedError as exc:
        pytest.fail(str(exc))
    finally:
        child.stop()


def _suppressed(am: Alertmanager, targets: list[Labels]) -> dict[frozenset[tuple[str, str]], dict[str, Any]]:
    """Alertmanager's alerts once every target is suppressed, or after 10 s."""
    deadline = time.monotonic() + 10
    while True:
        state = am.alerts()
        missing = [t for t in targets if state[frozenset(t.items())]["status"]["state"] != "suppressed"]
        if not missing or time.monotonic() > deadline:
            return state
        time.sleep(0.1)


def inhibitions(
    am: Alertmanager,
    sources: list[Labels],
    inhibited: list[tuple[Labels, list[Labels]]],
    active: list[Labels],
) -> None:
    """Post everything; each `inhibited` target ends up suppressed by one of its allowed sources, and
    every `active` alert (the sources included) stays active."""
    am.fire(*sources, *(target for target, _ in inhibited), *active)
    state = _suppressed(am, [target for target, _ in inhibited])
    for target, allowed in inhibited:
        status = state[frozenset(target.items())]["status"]
        by = {state[frozenset(source.items())]["fingerprint"] for source in allowed}
        assert status["state"] == "suppressed", (target, status)
        assert status["inhibitedBy"] and set(status["inhibitedBy"]) <= by, (target, status, allowed)
    for lset in (*sources, *active):
        status = state[frozenset(lset.items())]["status"]
        assert (status["state"], status["inhibitedBy"]) == ("active", []), (lset, status)
