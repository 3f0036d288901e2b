"""The Kubernetes area of the exporter's settings: where the kubelet's pod-resources socket is, and whether
(and how) the pods' revisions are learnt from the API server."""

from __future__ import annotations

from typing import Annotated

from pydantic import field_validator
from pydantic_settings import BaseSettings, NoDecode

from servescope.core.catalog.revision import DEFAULT_REVISION_POD_LABELS, pod_label_key
from servescope.core.kube import KubeAccess
from servescope.core.settings_cli import area_config, repeated, setting

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
        "Seconds between two reads of the kubelet's pod-resources List (and two health reports of the "
        "pod-labels source).",
        ge=1,
        le=300,
    )
    pod_labels: bool = setting(
        False,
        "--pod-labels/--no-pod-labels",
        "Learn the labels of this node's pods from the Kubernetes API server (a list, then a watch, of the "
        "pods whose spec.nodeName is --hostname, metadata only) and put each engine pod's `revision` on its "
        "serving series. Needs list and watch on pods (`deploy render` grants them) and the pod "
        "attribution above.",
    )
    revision_pod_labels: Annotated[list[str], NoDecode] = repeated(
        lambda: list(DEFAULT_REVISION_POD_LABELS),
        "--revision-pod-label",
        "With --pod-labels: pod label whose value is the engine's `revision` (repeat the flag, in order: the "
        "first the pod carries wins; in the environment, separate with spaces or commas).",
    )
    kube_api_url: str = setting(
        "",
        "--kube-api-url",
        "With --pod-labels: the API server's URL. Empty: the pod's ServiceAccount (in a cluster), else "
        "$KUBECONFIG or ~/.kube/config.",
    )
    kube_token_file: str = setting(
        "", "--kube-token-file", "With --kube-api-url: the file holding the bearer token it is sent."
    )
    kube_ca_file: str = setting(
        "", "--kube-ca-file", "With --kube-api-url: the CA bundle that checks its https certificate."
    )

    @field_validator("revision_pod_labels", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return value.replace(",", " ").split() if isinstance(value, str) else value

    @field_validator("revision_pod_labels")
    @classmethod
    def _keys(cls, value: list[str]) -> list[str]:
        return [pod_label_key(key) for key in value]

    def socket_chosen(self) -> bool:
        """True when the socket is not the kubelet's default path (then a missing one is reported)."""
        return self.pod_resources_socket != KUBELET_POD_RESOURCES_SOCKET

    def kube_access(self) -> KubeAccess:
        return KubeAccess(
            api_url=self.kube_api_url or None,
            token_file=self.kube_token_file or None,
            ca_file=self.kube_ca_file or None,
        )
