"""The Alertmanager configuration, checked by the real amtool and a real Alertmanager on loopback.

amtool validates the file and resolves routes offline; it cannot evaluate inhibitions, so those are
checked twice: structurally, and by posting alerts to a real `prometheus-alertmanager` started with the
built configuration and reading each alert's `status.inhibitedBy` back from its API v2.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from servescope.alerts import BUILD_DIR as ALERTS_BUILD
from servescope.alerts.alertmanager import HEARTBEAT, NULL, PAGER, TICKET, WEBHOOK
from servescope.alerts.bundle import all_alerts, write
from servescope.alerts.config import AlertsConfig
from servescope.alerts.model import BUNDLE_LABEL, WATCHDOG
from servescope.runbooks.webhook import WEBHOOK_PATH
from tests.support import Child, ChildFailedError, free_port

ROOT = Path(__file__).resolve().parents[2]
BUILT = ALERTS_BUILD / "alertmanager.yaml"
CONFIG = AlertsConfig()
ALERTS = {alert.name: alert for alert in all_alerts(CONFIG)}
INSTALL = "scripts/install-debian-tools.sh"
BY_SEVERITY = {"critical": PAGER, "warning": TICKET, "info": NULL}

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


def tool(name: str) -> str:
    path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if path is None:
        pytest.fail(f"{name} missing: install Debian prometheus-alertmanager ({INSTALL}, run by `make test`)")
    return path


def amtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("amtool"), *args], capture_output=True, text=True, timeout=60, check=False)


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
        ({"alertname": "ServescopeGpuLost", "severity": "critical", **OURS, **GPU0}, [WEBHOOK, PAGER]),
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


def test_pager_groups_by_alert_and_node() -> None:
    """One HGX node event on eight GPUs is one page: the pager groups by alertname and hostname only."""
    (pager,) = [r for r in yaml.safe_load(BUILT.read_text())["route"]["routes"] if r["receiver"] == PAGER]
    assert pager["group_by"] == ["alertname", "hostname"]


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


# --- inhibitions, structurally --------------------------------------------------------------------------


def inhibit_rules() -> list[dict[str, Any]]:
    return list(yaml.safe_load(BUILT.read_text())["inhibit_rules"])


def test_inhibit_rules() -> None:
    ours = 'bundle="servescope"'
    hardware = (
        'alertname=~"ServescopeGpuEccUncorrectable|ServescopeGpuLost|ServescopeGpuRowRemapFailed|'
        'ServescopeGpuXidCritical"'
    )
    combined = 'alertname=~"ServescopeGpuSaturatedKvPressure|ServescopeKvPressureHurtingRequests"'
    memory = (
        'alertname=~"ServescopeEngineOverMemoryBudget|ServescopeGpuMemoryHeadroomLow|'
        'ServescopeGpuMemoryLeakSuspected"'
    )
    sources_down = 'alertname=~"ServescopeSourceDown|ServescopeSourceStale"'
    engine = ["instance", "model_name", "engine", "endpoint"]
    assert [
        (rule["source_matchers"], rule["target_matchers"], rule["equal"]) for rule in inhibit_rules()
    ] == [
        ([ours, hardware], [ours, 'severity=~"warning|info"'], ["instance", "uuid"]),
        (
            [ours, 'alertname="ServescopeGpuLost"'],
            [ours, 'alertname!="ServescopeGpuLost"'],
            ["instance", "uuid"],
        ),
        ([ours, 'alertname="ServescopeGpuMemoryExhaustionSoon"'], [ours, memory], ["instance", "uuid"]),
        (
            [ours, 'alertname="ServescopeGpuSaturatedKvPressure"'],
            [ours, 'alertname="ServescopeGpuSaturated"'],
            ["instance", "uuid"],
        ),
        ([ours, combined], [ours, 'alertname="ServescopeKvCachePressure"'], engine),
        (
            [ours, 'alertname="ServescopeKvPressureHurtingRequests"'],
            [ours, 'alertname="ServescopeGpuSaturatedKvPressure"'],
            engine,
        ),
        (
            [ours, 'alertname="ServescopeTtftSloBurnFast"'],
            [ours, 'alertname=~"ServescopeTtftP99High|ServescopeTtftSloBurnSlow"'],
            ["model_name"],
        ),
        (
            [ours, 'alertname="ServescopeE2eSloBurnFast"'],
            [ours, 'alertname="ServescopeE2eSloBurnSlow"'],
            ["model_name"],
        ),
        (
            [ours, 'alertname="ServescopeExporterDown"'],
            [ours, 'alertname=~"ServescopeServingEndpointDown|ServescopeSourceDown|ServescopeSourceStale"'],
            ["job", "instance"],
        ),
        (
            [ours, 'alertname="ServescopeGpuNodeNvmlLost"'],
            [ours, sources_down, 'source="nvml"'],
            ["instance"],
        ),
    ]


def _names(matcher: str) -> list[str]:
    label, _, value = matcher.partition("=")
    return value.lstrip("~").strip('"').split("|") if label.rstrip("!") == "alertname" else []


def test_inhibit_rules_name_alerts_of_the_bundle() -> None:
    """A renamed alert must not leave an inhibition matching nothing."""
    for rule in inhibit_rules():
        for matcher in (*rule["source_matchers"], *rule["target_matchers"]):
            for name in _names(matcher):
                assert name in ALERTS, f"inhibit rule {rule} names {name}, which the bundle lacks"


def test_inhibit_sources_carry_the_equal_labels() -> None:
    """An `equal` label the source lacks would make the rule silence only targets that lack it too.

    The labels an alert carries are the keys its links are built from (GPU_KEYS, ENGINE_KEYS, ...).
    """
    for rule in inhibit_rules():
        sources = [n for m in rule["source_matchers"] for n in _names(m)]
        for name in sources:
            carried = {*ALERTS[name].keys, "job"}
            assert set(rule["equal"]) <= carried, (name, rule["equal"], carried)


# --- inhibitions, for real ------------------------------------------------------------------------------


@dataclass
class Alertmanager:
    url: str

    def request(self, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path,
            data=data,
            headers={"Content-Type": "application/json"},
            method="POST" if data else "GET",
        )
        with urllib.request.urlopen(req, timeout=5) as response:
            text = response.read()
        return json.loads(text) if text.strip() else None

    def fire(self, *labels: dict[str, str], resolved: bool = False) -> None:
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

    def alerts(self) -> dict[frozenset[tuple[str, str]], dict[str, Any]]:
        return {frozenset(a["labels"].items()): a for a in self.request("/api/v2/alerts")}

    def resolve_all(self) -> None:
        """Resolve every alert posted so far: the next test starts with nothing active."""
        posted = [dict(labels) for labels in self.alerts()]
        if posted:
            self.fire(*posted, resolved=True)


@pytest.fixture(scope="module")
def shared_alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alertmanager]:
    """The real Alertmanager with the built configuration, one for the module; the webhook points at a
    closed local port."""
    binary = tool("prometheus-alertmanager")
    tmp_path = tmp_path_factory.mktemp("alertmanager")
    config = yaml.safe_load(BUILT.read_text())
    token = tmp_path / "token"
    token.write_text("test-token\n")
    for receiver in config["receivers"]:
        for webhook in receiver.get("webhook_configs", []):
            webhook["url"] = f"http://127.0.0.1:{free_port()}/api/v1/alertmanager"
            webhook["http_config"]["authorization"]["credentials_file"] = str(token)
    path = tmp_path / "alertmanager.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    argv = [
        binary,
        f"--config.file={path}",
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


@pytest.fixture
def alertmanager(shared_alertmanager: Alertmanager) -> Iterator[Alertmanager]:
    """The module's Alertmanager, with every alert a test posted resolved after it."""
    yield shared_alertmanager
    shared_alertmanager.resolve_all()


def alert(name: str, labels: dict[str, str]) -> dict[str, str]:
    """The labels Prometheus would send for alert `name` on `labels`."""
    return {
        "alertname": name,
        "severity": ALERTS[name].severity,
        **BUNDLE_LABEL,
        **ALERTS[name].labels,
        **labels,
    }


Labels = dict[str, str]


def inhibitions(
    am: Alertmanager,
    sources: list[Labels],
    inhibited: list[tuple[Labels, list[Labels]]],
    active: list[Labels],
) -> None:
    """Post everything; each `inhibited` target ends up suppressed by one of its allowed sources, and
    every `active` alert (the sources included) stays active."""
    am.fire(*sources, *(target for target, _ in inhibited), *active)
    deadline = time.monotonic() + 10
    while True:
        state = am.alerts()
        missing = [t for t, _ in inhibited if state[frozenset(t.items())]["status"]["state"] != "suppressed"]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for target, allowed in inhibited:
        status = state[frozenset(target.items())]["status"]
        by = {state[frozenset(source.items())]["fingerprint"] for source in allowed}
        assert status["state"] == "suppressed", (target, status)
        assert status["inhibitedBy"] and set(status["inhibitedBy"]) <= by, (target, status, allowed)
    for lset in (*sources, *active):
        status = state[frozenset(lset.items())]["status"]
        assert (status["state"], status["inhibitedBy"]) == ("active", []), (lset, status)


@pytest.mark.e2e
def test_critical_gpu_alert_inhibits_warnings_about_that_gpu(alertmanager: Alertmanager) -> None:
    xid = alert("ServescopeGpuXidCritical", {**GPU0, "xid": "79"})
    ecc = alert("ServescopeGpuEccUncorrectable", GPU0)  # critical: a critical does not silence it
    inhibitions(
        alertmanager,
        sources=[xid, ecc],
        inhibited=[
            (alert("ServescopeNvlinkCrcErrors", GPU0), [xid, ecc]),
            (alert("ServescopeGpuPowerThrottling", GPU0), [xid, ecc]),  # info
            (alert("ServescopeEngineOverMemoryBudget", ENGINE_ON_GPU0), [xid, ecc]),
        ],
        active=[
            alert("ServescopeNvlinkCrcErrors", GPU1),  # another GPU
            alert("ServescopeGpuThermalThrottling", NODE_B_GPU),  # another node
            alert("ServescopeKvCachePressure", ENGINE),  # about the engine, no GPU
        ],
    )


@pytest.mark.e2e
def test_combined_alert_inhibits_its_parts(alertmanager: Alertmanager) -> None:
    combined = alert("ServescopeGpuSaturatedKvPressure", ENGINE_ON_GPU0)
    inhibitions(
        alertmanager,
        sources=[combined],
        inhibited=[
            (alert("ServescopeGpuSaturated", GPU0), [combined]),
            # no uuid on the engine's alert: only the combined rule can silence it
            (alert("ServescopeKvCachePressure", ENGINE), [combined]),
        ],
        active=[
            alert("ServescopeGpuSaturated", GPU1),
            alert("ServescopeKvCachePressure", OTHER_ENGINE),
            alert("ServescopeKvCachePressure", {**ENGINE, "instance": "node-b:9108"}),
            alert("ServescopeRequestQueueBuilding", ENGINE),  # not one of its parts
        ],
    )


@pytest.mark.e2e
def test_lost_gpu_inhibits_everything_about_it(alertmanager: Alertmanager) -> None:
    lost = alert("ServescopeGpuLost", GPU0)
    ecc = alert("ServescopeGpuEccUncorrectable", GPU0)
    combined = alert("ServescopeGpuSaturatedKvPressure", ENGINE_ON_GPU0)
    inhibitions(
        alertmanager,
        sources=[lost],
        inhibited=[
            # critical alerts: only the GpuLost rule silences these
            (ecc, [lost]),
            # warnings: any hardware-critical alert on the GPU may be named as their inhibitor
            (combined, [lost, ecc]),
            (alert("ServescopeNvlinkCrcErrors", GPU0), [lost, ecc]),
        ],
        active=[
            alert("ServescopeGpuLost", GPU1),  # one lost GPU does not hide another
            # The page is per engine, no GPU labels: it fires on a saturated GPU, which a lost one is not.
            alert("ServescopeKvPressureHurtingRequests", {**ENGINE, "hostname": "node-a"}),
            alert("ServescopeNvlinkCrcErrors", NODE_B_GPU),
            # about an engine, no GPU (not ENGINE: the combined alert, inhibited or not, silences it)
            alert("ServescopeKvCachePressure", OTHER_ENGINE),
        ],
    )


@pytest.mark.e2e
def test_exporter_down_inhibits_its_sources_not_the_fleet_wide_absent_series(
    alertmanager: Alertmanager,
) -> None:
    down = alert("ServescopeExporterDown", TARGET)
    absent = {"job": "servescope"}  # absent() keeps the selector's equality labels only
    inhibitions(
        alertmanager,
        sources=[down],
        inhibited=[
            (alert("ServescopeSourceDown", {**TARGET, "source": "dcgm"}), [down]),
            (alert("ServescopeServingEndpointDown", {**TARGET, "endpoint": ENGINE["endpoint"]}), [down]),
            (alert("ServescopeSourceStale", {**TARGET, "source": "nvml"}), [down]),
        ],
        active=[
            # fleet-wide: one exporter down (a node in maintenance) must not hide a fleet without series
            alert("ServescopeGpuMetricsAbsent", absent),
            alert("ServescopeServingMetricsAbsent", absent),
            alert("ServescopeDerivedMetricsAbsent", absent),
            # another exporter's source is down for its own reasons
            alert("ServescopeSourceDown", {"job": "servescope", "instance": "node-b:9108", "source": "dcgm"}),
            alert("ServescopeSourceDown", {"job": "other", "instance": "node-a:9108", "source": "dcgm"}),
            alert("ServescopeGpuMetricsAbsent", {"job": "other"}),
            alert("ServescopeGpuSaturated", GPU0),  # not explained by a scrape failure
        ],
    )


@pytest.mark.e2e
def test_load_alerts_do_not_hide_the_hardware_warnings_of_their_gpu(alertmanager: Alertmanager) -> None:
    """A saturated GPU's thermal, NVLink, PCIe or row-remap warning is often why it is saturated."""
    hurting = alert("ServescopeKvPressureHurtingRequests", {**ENGINE, "hostname": "node-a"})  # per engine
    # A tensor-parallel engine on GPUs 0 and 1: the combined warning on each, silenced by the one page.
    combined = alert("ServescopeGpuSaturatedKvPressure", {**ENGINE_ON_GPU0, "hostname": "node-a"})
    combined_gpu1 = alert(
        "ServescopeGpuSaturatedKvPressure", {**ENGINE, "hostname": "node-a", "gpu": "1", "uuid": "GPU-1111"}
    )
    inhibitions(
        alertmanager,
        sources=[hurting],
        inhibited=[
            (combined, [hurting]),
            (combined_gpu1, [hurting]),
            (alert("ServescopeGpuSaturated", GPU0), [combined]),
            (alert("ServescopeGpuSaturated", GPU1), [combined_gpu1]),
            (alert("ServescopeKvCachePressure", ENGINE), [hurting, combined, combined_gpu1]),
        ],
        active=[
            alert("ServescopeGpuThermalThrottling", GPU0),
            alert("ServescopeNvlinkCrcErrors", GPU0),
            alert("ServescopePcieReplays", GPU0),
            alert("ServescopeGpuRowRemapPending", GPU0),
            alert("ServescopeNvlinkLinkDown", GPU0),
        ],
    )


@pytest.mark.e2e
def test_fast_burn_hides_the_slow_burn_and_p99_of_its_model(alertmanager: Alertmanager) -> None:
    fast = alert("ServescopeTtftSloBurnFast", {"model_name": "deepseek"})
    e2e_fast = alert("ServescopeE2eSloBurnFast", {"model_name": "qwen"})
    inhibitions(
        alertmanager,
        sources=[fast, e2e_fast],
        inhibited=[
            (alert("ServescopeTtftSloBurnSlow", {"model_name": "deepseek"}), [fast]),
            (alert("ServescopeTtftP99High", {"model_name": "deepseek"}), [fast]),
            (alert("ServescopeE2eSloBurnSlow", {"model_name": "qwen"}), [e2e_fast]),
        ],
        active=[
            alert("ServescopeTtftSloBurnSlow", {"model_name": "qwen"}),  # another model
            alert("ServescopeTtftP99High", {"model_name": "llama"}),
            alert("ServescopeE2eSloBurnSlow", {"model_name": "deepseek"}),  # the other SLI
        ],
    )


@pytest.mark.e2e
def test_node_wide_nvml_failure_hides_its_nvml_source_only(alertmanager: Alertmanager) -> None:
    lost = alert("ServescopeGpuNodeNvmlLost", {**TARGET, "hostname": "node-a"})
    inhibitions(
        alertmanager,
        sources=[lost],
        inhibited=[(alert("ServescopeSourceDown", {**TARGET, "source": "nvml"}), [lost])],
        active=[
            alert("ServescopeSourceDown", {**TARGET, "source": "dcgm"}),
            alert("ServescopeSourceDown", {**TARGET, "instance": "node-b:9108", "source": "nvml"}),
        ],
    )


@pytest.mark.e2e
def test_bundle_inhibitions_leave_foreign_alerts_alone(alertmanager: Alertmanager) -> None:
    lost = alert("ServescopeGpuLost", GPU0)
    foreign = {"alertname": "DCGMGpuHot", "severity": "warning", **GPU0}
    inhibitions(alertmanager, sources=[lost], inhibited=[], active=[foreign])


@pytest.mark.e2e
def test_inhibition_lifts_when_the_source_resolves(alertmanager: Alertmanager) -> None:
    lost = alert("ServescopeGpuLost", GPU0)
    target = alert("ServescopeGpuEccUncorrectable", GPU0)
    inhibitions(alertmanager, sources=[lost], inhibited=[(target, [lost])], active=[])
    alertmanager.fire(lost, resolved=True)
    deadline = time.monotonic() + 10
    while (status := alertmanager.alerts()[frozenset(target.items())]["status"])["state"] != "active":
        assert time.monotonic() < deadline, status
        time.sleep(0.1)
    assert status["inhibitedBy"] == []
