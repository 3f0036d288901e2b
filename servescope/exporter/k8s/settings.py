"""The Kubernetes area of the exporter's settings: where the kubelet's pod-resources socket is."""

from __future__ import annotations

from pydantic_settings import BaseSettings

from servescope.common.settings_cli import area_config, setting

KUBELET_POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"


class K8sSettings(BaseSettings):
    model_config = area_config("k8s")

    pod_resources_socket: str = setting(
        KUBELET_POD_RESOURCES_SOCKET,
        "--pod-resources-socket",
        "The kubelet's pod-resources gRPC socket: which pod and container holds each GPU "
        "(servescope_gpu_pod_info). Mount it read-only; absent at this default path, attribution is off "
        "(logged); absent at a path you set, the source reports `absent`.",
    )
    pod_resources_interval_seconds: float = setting(
        15.0,
        "--pod-resources-interval",
        "Seconds between two reads of the kubelet's pod-resources List.",
        ge=1,
        le=300,
    )

    def socket_chosen(self) -> bool:
        """True when the socket is not the kubelet's default path (then a missing one is reported)."""
        return self.pod_resources_socket != KUBELET_POD_RESOURCES_SOCKET
