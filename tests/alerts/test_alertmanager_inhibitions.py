"""The built inhibitions, for real: alerts posted to a real `prometheus-alertmanager` started with the
built configuration, each alert's `status.inhibitedBy` read back from its API v2."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.alerts.alertmanager import (
    ENGINE,
    ENGINE_ON_GPU0,
    GPU0,
    GPU1,
    NODE_B_GPU,
    OTHER_ENGINE,
    TARGET,
    Alertmanager,
    alert,
    inhibitions,
    running_alertmanager,
)


@pytest.fixture(scope="module")
def shared_alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alertmanager]:
    """The real Alertmanager with the built configuration, one for the module; the webhook points at a
    closed local port."""
    with running_alertmanager(tmp_path_factory.mktemp("alertmanager")) as am:
        yield am


@pytest.fixture
def alertmanager(shared_alertmanager: Alertmanager) -> Iterator[Alertmanager]:
    """The module's Alertmanager, with every alert a test posted resolved after it."""
    yield shared_alertmanager
    shared_alertmanager.resolve_all()


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


ENGINE_ON_NODE = {**ENGINE, "hostname": "node-a"}


@pytest.mark.e2e
def test_combined_alert_inhibits_its_parts(alertmanager: Alertmanager) -> None:
    combined = alert("ServescopeGpuSaturatedKvPressure", ENGINE_ON_NODE)  # per engine, no GPU
    inhibitions(
        alertmanager,
        sources=[combined],
        inhibited=[
            # its node's saturated GPUs (one ticket group per node either way)
            (alert("ServescopeGpuSaturated", GPU0), [combined]),
            (alert("ServescopeGpuSaturated", GPU1), [combined]),
            (alert("ServescopeKvCachePressure", ENGINE), [combined]),
        ],
        active=[
            alert("ServescopeGpuSaturated", NODE_B_GPU),
            alert("ServescopeKvCachePressure", OTHER_ENGINE),
            alert("ServescopeKvCachePressure", {**ENGINE, "instance": "node-b:9108"}),
            alert("ServescopeRequestQueueBuilding", ENGINE),  # not one of its parts
        ],
    )


@pytest.mark.e2e
def test_lost_gpu_inhibits_everything_about_it(alertmanager: Alertmanager) -> None:
    lost = alert("ServescopeGpuLost", GPU0)
    ecc = alert("ServescopeGpuEccUncorrectable", GPU0)
    inhibitions(
        alertmanager,
        sources=[lost],
        inhibited=[
            # a hardware alert: only the GpuLost rule silences it
            (ecc, [lost]),
            # other warnings: any hardware alert on the GPU may be named as their inhibitor
            (alert("ServescopeNvlinkCrcErrors", GPU0), [lost, ecc]),
            (alert("ServescopeEngineOverMemoryBudget", ENGINE_ON_GPU0), [lost, ecc]),
        ],
        active=[
            alert("ServescopeGpuLost", GPU1),  # one lost GPU does not hide another
            alert("ServescopeNvlinkCrcErrors", NODE_B_GPU),
            # about an engine, no GPU: a ticket on the engine stays
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
    hurting = alert("ServescopeKvPressureHurtingRequests", ENGINE_ON_NODE)  # the page, per engine
    combined = alert("ServescopeGpuSaturatedKvPressure", ENGINE_ON_NODE)
    inhibitions(
        alertmanager,
        sources=[hurting],
        inhibited=[
            (combined, [hurting]),
            (alert("ServescopeGpuSaturated", GPU0), [combined]),
            (alert("ServescopeKvCachePressure", ENGINE), [hurting, combined]),
        ],
        active=[
            alert("ServescopeGpuThermalThrottling", GPU0),
            alert("ServescopeNvlinkCrcErrors", GPU0),
            alert("ServescopePcieReplays", GPU0),
            alert("ServescopeGpuRowRemapPending", GPU0),
            alert("ServescopeNvlinkLinkDown", GPU0),
        ],
    )


MISTRAL_DOWN = {**TARGET, "endpoint": "http://10.1.4.2:8000/metrics", "model_name": "mistral"}


@pytest.mark.e2e
def test_a_page_mutes_the_tickets_of_its_model_and_the_kv_page_its_burn(alertmanager: Alertmanager) -> None:
    """One page per incident: the engine's KV page says more than the model's burn page; either page
    explains every ticket about its model (the causes), and nothing of another model."""
    fast = alert("ServescopeTtftSloBurnFast", {"model_name": "deepseek"})
    hurting = alert("ServescopeKvPressureHurtingRequests", ENGINE_ON_NODE)
    available = alert("ServescopeAvailabilitySloBurnFast", {"model_name": "mistral"})
    inhibitions(
        alertmanager,
        sources=[hurting, available],
        inhibited=[
            (fast, [hurting]),
            (alert("ServescopeTtftSloBurnSlow", {"model_name": "deepseek"}), [fast, hurting]),
            (alert("ServescopeTtftP99High", {"model_name": "deepseek"}), [fast, hurting]),
            (alert("ServescopeE2eSloBurnSlow", {"model_name": "deepseek"}), [fast, hurting]),
            (alert("ServescopeRequestQueueBuilding", ENGINE), [fast, hurting]),
            (alert("ServescopePreemptionsSustained", ENGINE), [fast, hurting]),
            (alert("ServescopeServingEndpointDown", MISTRAL_DOWN), [available]),
            (
                alert("ServescopeSchedulerStuck", {**TARGET, "model_name": "mistral", "engine": "0"}),
                [available],
            ),
        ],
        active=[
            alert("ServescopeTtftSloBurnSlow", {"model_name": "qwen"}),  # another model
            alert("ServescopeKvCachePressure", {**OTHER_ENGINE, "model_name": "qwen"}),
            alert("ServescopeGpuSaturated", GPU0),  # a GPU is no model's
        ],
    )


@pytest.mark.e2e
def test_a_blind_fleet_is_one_page(alertmanager: Alertmanager) -> None:
    absent = alert("ServescopeExporterTargetsAbsent", {"job": "servescope"})
    blind = alert("ServescopeMonitoringBlind", {})
    # What a blind fleet explains: either blindness page may be named as what mutes it.
    parts = [
        alert("ServescopeExporterDown", TARGET),
        alert("ServescopeGpuMetricsAbsent", {"job": "servescope"}),
        alert("ServescopeGpuNodeWithoutExporter", {"node": "node-e"}),
        alert("ServescopeSourceDown", {**TARGET, "source": "dcgm"}),
        alert("ServescopeAgentShardSilent", {"prometheus": "monitoring/agent", "prometheus_replica": "a-0"}),
    ]
    inhibitions(
        alertmanager,
        sources=[absent],
        inhibited=[(blind, [absent]), *((part, [absent, blind]) for part in parts)],
        active=[
            alert("ServescopeTtftSloBurnFast", {"model_name": "deepseek"}),  # a symptom is measured elsewhere
            alert("ServescopeKubeStateMetricsAbsent", {"job": "kube-state-metrics"}),
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
    while (status := alertmanager.status(target))["state"] != "active":
        assert time.monotonic() < deadline, status
        time.sleep(0.1)
    assert status["inhibitedBy"] == []
