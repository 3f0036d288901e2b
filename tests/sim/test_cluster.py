"""The simulated node's Kubernetes side (sim/cluster.py, kube_api.py, kubelet.py), read by the same
clients servescope reads a cluster with: the kubelet's pod-resources client, the exporter's list and
watch of its node's pods, and lightkube for the Deployment and its ReplicaSets."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from lightkube import Client, KubeConfig, operators
from lightkube.config.models import Cluster, User
from lightkube.generic_resource import GenericNamespacedResource, create_api_info

from servescope.core.kube import KubeAccess, http_client
from servescope.exporter.k8s.client import PodResourcesClient
from servescope.exporter.k8s.pod_watch import Event, list_pods, watch_pods
from servescope_sim.cluster import CANARY_REVISION, DEPLOYMENT, NAMESPACE, STABLE_REVISION, template
from servescope_sim.kube_api import selects
from servescope_sim.kubernetes import SimulatedCluster

pytestmark = pytest.mark.e2e  # a gRPC server and an HTTP server on loopback
GPUS = [["GPU-00000000-0000-0000-0000-000000000000"], ["GPU-11111111-1111-1111-1111-111111111111"]]


class ReplicaSet(GenericNamespacedResource):
    _api_info = create_api_info("apps", "v1", "ReplicaSet", "replicasets")


class Deployment(GenericNamespacedResource):
    _api_info = create_api_info("apps", "v1", "Deployment", "deployments")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SimulatedCluster]:
    made = SimulatedCluster("node-a", GPUS, tmp_path / "kubelet.sock", "127.0.0.1:0")
    made.start()
    try:
        yield made
    finally:
        made.stop()


@pytest.fixture
def http(cluster: SimulatedCluster) -> Iterator[httpx2.Client]:
    client = http_client(KubeAccess(api_url=cluster.url), httpx2.Timeout(5.0))
    yield client
    client.close()


def test_the_kubelet_and_the_api_server_name_the_same_pods(
    cluster: SimulatedCluster, http: httpx2.Client
) -> None:
    kubelet = PodResourcesClient(str(cluster.socket))
    listing = kubelet.list()
    kubelet.close()
    held = {
        p.name: [d for c in p.containers for dev in c.devices for d in dev.device_ids]
        for p in listing.pod_resources
    }
    pods, version = list_pods(http, "node-a", consistent=False)
    assert {p.name for p in pods} == set(held) and all(
        name.startswith(f"{DEPLOYMENT}-{STABLE_REVISION}-") for name in held
    )
    assert sorted(held.values()) == GPUS
    assert {p.labels["pod-template-hash"] for p in pods} == {STABLE_REVISION} and int(version) > 0
    assert list_pods(http, "node-b", consistent=True)[0] == []  # another node's: none


def test_a_rollout_step_is_a_deleted_and_an_added_pod_on_the_watch(
    cluster: SimulatedCluster, http: httpx2.Client
) -> None:
    client = http
    _, version = list_pods(client, "node-a", consistent=False)
    seen: list[Event] = []
    watching = threading.Thread(target=lambda: seen.extend(watch_pods(client, "node-a", version, 2)))
    watching.start()
    cluster.set_revisions([STABLE_REVISION, CANARY_REVISION])
    watching.join(10)
    kinds = [(e.kind, e.pod.labels["pod-template-hash"] if e.pod else None) for e in seen]
    assert kinds == [("DELETED", STABLE_REVISION), ("ADDED", CANARY_REVISION), ("BOOKMARK", None)]
    versions = [int(e.resource_version) for e in seen]
    assert versions[0] < versions[1] == versions[2]
    assert seen[1].pod is not None and seen[1].pod.name in {p.name for p in cluster.state.pods.values()}


def test_rollback_reads_the_deployment_and_both_replicasets_through_lightkube(
    cluster: SimulatedCluster,
) -> None:
    cluster.set_revisions([STABLE_REVISION, CANARY_REVISION])
    config = KubeConfig.from_one(cluster=Cluster(server=cluster.url), user=User())
    client = Client(config, trust_env=False)
    selector = {"pod-template-hash": operators.in_([CANARY_REVISION, STABLE_REVISION])}
    found = {
        rs["metadata"]["name"]: rs
        for rs in map(dict, client.list(ReplicaSet, namespace=NAMESPACE, labels=selector))
    }
    assert set(found) == {f"{DEPLOYMENT}-{STABLE_REVISION}", f"{DEPLOYMENT}-{CANARY_REVISION}"}
    canary = found[f"{DEPLOYMENT}-{CANARY_REVISION}"]
    assert (
        canary["status"]["replicas"] == 1 and canary["metadata"]["ownerReferences"][0]["name"] == DEPLOYMENT
    )
    deployment = dict(client.get(Deployment, DEPLOYMENT, namespace=NAMESPACE))
    assert deployment["spec"]["template"] == template(CANARY_REVISION)  # it runs the canary's template
    assert deployment["metadata"]["uid"] == canary["metadata"]["ownerReferences"][0]["uid"]
    refused = httpx2.patch(
        f"{cluster.url}/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{DEPLOYMENT}", json={}
    )
    assert refused.status_code == 405 and refused.json()["kind"] == "Status"
    client.close()


@pytest.mark.parametrize(
    ("selector", "holds"),
    [
        ("a=1", True), ("a==1", True), ("a!=1", False), ("a in (1,2)", True), ("a notin (1, 2)", False),
        ("a,b", False), ("!b", True), ("a=1,b in (3)", False), ("a = 1 , c", False), ("", True),
    ],
)  # fmt: skip
def test_label_selectors_as_the_api_server_reads_them(selector: str, holds: bool) -> None:
    assert selects(selector, {"a": "1"}) is holds
