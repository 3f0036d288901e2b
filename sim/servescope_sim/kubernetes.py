"""The simulated node's Kubernetes side as one piece: the kubelet's socket and the API server over one
cluster state (cluster.py), started and stopped with the simulated node."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from servescope_sim.cluster import GPU_RESOURCE, STABLE_REVISION, ClusterState
from servescope_sim.kube_api import SimulatedApiServer
from servescope_sim.kubelet import SimulatedKubelet, allocatable


class SimulatedCluster:
    """The kubelet's socket and the API server of a simulated node, over one ClusterState."""

    def __init__(self, node: str, gpu_uuids: Sequence[Sequence[str]], socket: Path, listen: str) -> None:
        self.state = ClusterState(node, gpu_uuids)
        self.state.set_revisions([STABLE_REVISION] * len(gpu_uuids))
        self.kubelet = SimulatedKubelet(socket)
        self.kubelet.pods = self.state.kubelet_pods()
        self.kubelet.allocatable = [
            allocatable(GPU_RESOURCE, [uuid for group in gpu_uuids for uuid in group])
        ]
        self.api = SimulatedApiServer(self.state, listen)

    @property
    def url(self) -> str:
        return self.api.url

    @property
    def socket(self) -> Path:
        return self.kubelet.socket

    def set_revisions(self, revisions: Sequence[str]) -> None:
        if self.state.set_revisions(revisions):
            self.kubelet.pods = self.state.kubelet_pods()

    def start(self) -> None:
        self.kubelet.start()
        self.api.start()

    def stop(self) -> None:
        self.api.stop()
        self.kubelet.stop()
