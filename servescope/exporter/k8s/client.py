"""A client of the kubelet's pod-resources v1 gRPC API on its unix socket: List, GetAllocatableResources."""

from __future__ import annotations

import grpc

from servescope.core.errors import ServescopeError
from servescope.exporter.k8s import podresources_pb2 as pb

SERVICE = "/v1.PodResourcesLister/"
MAX_RESPONSE_BYTES = 16 * 1024 * 1024  # the kubelet's own limit; a larger answer is refused, not read


class PodResourcesError(ServescopeError):
    """A call to the kubelet failed; `reason` is a bounded label (unavailable, timeout, ...)."""

    reason = "unavailable"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, reason=reason)


class PodResourcesClient:
    """One channel to the socket, reused across calls; every call has a deadline."""

    def __init__(self, socket_path: str, timeout_seconds: float = 5.0) -> None:
        self.socket_path = socket_path
        self._timeout = timeout_seconds
        self._channel = grpc.insecure_channel(
            f"unix://{socket_path}",
            options=[("grpc.max_receive_message_length", MAX_RESPONSE_BYTES)],
        )
        self._list = self._channel.unary_unary(
            SERVICE + "List",
            request_serializer=pb.ListPodResourcesRequest.SerializeToString,
            response_deserializer=pb.ListPodResourcesResponse.FromString,
        )
        self._allocatable = self._channel.unary_unary(
            SERVICE + "GetAllocatableResources",
            request_serializer=pb.AllocatableResourcesRequest.SerializeToString,
            response_deserializer=pb.AllocatableResourcesResponse.FromString,
        )

    def list(self) -> pb.ListPodResourcesResponse:
        try:
            response: pb.ListPodResourcesResponse = self._list(
                pb.ListPodResourcesRequest(), timeout=self._timeout
            )
        except grpc.RpcError as exc:
            raise self._error("List", exc) from None
        return response

    def allocatable(self) -> pb.AllocatableResourcesResponse | None:
        """None when the kubelet does not offer the call (before Kubernetes 1.23, or gated off)."""
        try:
            response: pb.AllocatableResourcesResponse = self._allocatable(
                pb.AllocatableResourcesRequest(), timeout=self._timeout
            )
        except grpc.RpcError as exc:
            if _code(exc) is grpc.StatusCode.UNIMPLEMENTED:
                return None
            raise self._error("GetAllocatableResources", exc) from None
        return response

    def _error(self, call: str, exc: grpc.RpcError) -> PodResourcesError:
        code = _code(exc)
        reason = code.name.lower() if code else "rpc"
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            reason = "timeout"
        detail = exc.details() if isinstance(exc, grpc.Call) else str(exc)
        return PodResourcesError(reason, f"{self.socket_path}: {call}: {reason}: {detail}")

    def close(self) -> None:
        self._channel.close()


def _code(exc: grpc.RpcError) -> grpc.StatusCode | None:
    return exc.code() if isinstance(exc, grpc.Call) else None
