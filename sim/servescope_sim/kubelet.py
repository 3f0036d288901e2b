"""A kubelet's pod-resources endpoint: the real gRPC protocol (v1 PodResourcesLister) on a unix socket,
answering with the pods it is given. The simulated node's Kubernetes side (cluster.py) serves its engine
pods through it; the tests give it any pods they need."""

from __future__ import annotations

import threading
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from servescope.exporter.k8s import podresources_pb2 as pb


class SimulatedKubelet:
    """PodResourcesLister (List, GetAllocatableResources) served on `socket`; `pods` may change any time."""

    def __init__(self, socket: Path, *, allocatable_implemented: bool = True) -> None:
        self.socket = socket
        self.pods: list[Any] = []
        self.allocatable: list[Any] = []
        self.calls: list[str] = []
        self._lock = threading.Lock()
        self._allocatable_implemented = allocatable_implemented
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        handlers = {
            "List": grpc.unary_unary_rpc_method_handler(
                self._list,
                request_deserializer=pb.ListPodResourcesRequest.FromString,
                response_serializer=pb.ListPodResourcesResponse.SerializeToString,
            ),
            "GetAllocatableResources": grpc.unary_unary_rpc_method_handler(
                self._get_allocatable,
                request_deserializer=pb.AllocatableResourcesRequest.FromString,
                response_serializer=pb.AllocatableResourcesResponse.SerializeToString,
            ),
        }
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("v1.PodResourcesLister", handlers),)
        )
        self._server.add_insecure_port(f"unix:{socket}")

    def _list(self, request: Any, context: Any) -> Any:
        with self._lock:
            self.calls.append("List")
            return pb.ListPodResourcesResponse(pod_resources=self.pods)

    def _get_allocatable(self, request: Any, context: Any) -> Any:
        with self._lock:
            self.calls.append("GetAllocatableResources")
        if not self._allocatable_implemented:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "GetAllocatableResources is gated off")
        return pb.AllocatableResourcesResponse(devices=self.allocatable)

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop(grace=None).wait(5)

    def __enter__(self) -> SimulatedKubelet:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def container(name: str, *devices: tuple[str, list[str]], claims: list[Any] | None = None) -> Any:
    """A container's resources as the kubelet lists them: device-plugin devices and DRA claims."""
    return pb.ContainerResources(
        name=name,
        devices=[pb.ContainerDevices(resource_name=r, device_ids=ids) for r, ids in devices],
        dynamic_resources=claims or [],
    )


def pod(namespace: str, name: str, *containers: Any) -> Any:
    return pb.PodResources(namespace=namespace, name=name, containers=list(containers))


def allocatable(resource: str, device_ids: list[str]) -> Any:
    """Devices the kubelet may allocate (GetAllocatableResources' answer, one resource)."""
    return pb.ContainerDevices(resource_name=resource, device_ids=device_ids)
