"""Names, ports, paths and labels that every manifest (and the Dockerfile) must agree on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from servescope import __version__

APP = "servescope"
EXPORTER = "servescope"  # DaemonSet, Service, ServiceAccount; Prometheus's job label is this Service's name
RUNBOOKS = "servescope-runbooks"  # Deployment, Service, ServiceAccount and Secret of the runbook service
AGENT = "servescope-agent"  # the PrometheusAgent of --agent, its ServiceAccount and cluster role
VLLM_MONITOR = "servescope-vllm"  # the PodMonitor of --topology podmonitor
VLLM_JOB = "vllm"  # the job label the PodMonitor gives the engines' series
EXPORTER_PORT = 9108
RUNBOOKS_PORT = 9110
METRICS_PORT_NAME = "metrics"
HTTP_PORT_NAME = "http"

# The Dockerfile's USER: a fixed number so that `runAsNonRoot` can verify it without a passwd lookup.
NONROOT_UID = 65532

# The runbook service's tokens, one Secret, mounted as files.
SECRET = RUNBOOKS
WEBHOOK_TOKEN_KEY = "token"  # the bearer token Alertmanager sends with every notification
CHANGE_TOKEN_KEY = "change-token"  # the bearer token people send to run a change step over HTTP
TOKEN_DIR = "/var/run/secrets/servescope-runbooks"
STATE_DIR = "/var/lib/servescope"
# Where kube-prometheus-stack mounts a Secret listed in alertmanager.alertmanagerSpec.secrets.
ALERTMANAGER_SECRETS_DIR = "/etc/alertmanager/secrets"

DEFAULT_IMAGE = f"ghcr.io/servescope/servescope:{__version__}"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"  # set by the GPU Operator's feature discovery
GPU_RESOURCE = "nvidia.com/gpu"  # the taint key GPU node pools commonly carry
# Every namespace carries this label (Kubernetes 1.21+), which makes a namespace selectable by name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def nonroot_pod_security() -> dict[str, Any]:
    """The pod securityContext of servescope's non-root workloads: its fixed UID and group (which also
    owns a mounted claim, fsGroup), and the runtime's default seccomp profile."""
    return {
        "runAsUser": NONROOT_UID,
        "runAsGroup": NONROOT_UID,
        "runAsNonRoot": True,
        "fsGroup": NONROOT_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def selector_labels(component: str) -> dict[str, str]:
    """The labels a workload selects its pods by; immutable once applied, so no version in them."""
    return {"app.kubernetes.io/name": APP, "app.kubernetes.io/component": component}


def labels(component: str) -> dict[str, str]:
    return {
        **selector_labels(component),
        "app.kubernetes.io/part-of": APP,
        "app.kubernetes.io/version": __version__,
    }


def metadata(name: str, namespace: str, component: str, **extra_labels: str) -> dict[str, object]:
    return {"name": name, "namespace": namespace, "labels": {**labels(component), **extra_labels}}


def namespaced(
    api_version: str,
    kind: str,
    name: str,
    namespace: str,
    component: str,
    *,
    extra_labels: Mapping[str, str] | None = None,
    **body: Any,
) -> dict[str, Any]:
    """A namespaced object: apiVersion, kind, servescope's metadata, then `body` (spec, data...)."""
    meta = metadata(name, namespace, component, **(extra_labels or {}))
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **body}


def cluster_metadata(name: str, component: str) -> dict[str, object]:
    """Metadata of a cluster-scoped object (no namespace)."""
    return {"name": name, "labels": labels(component)}


def service(
    name: str,
    namespace: str,
    component: str,
    port_name: str,
    port: int,
    *,
    selector: Mapping[str, str] | None = None,
    target_port: int | str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """The Service of `component`'s pods (or of the pods `selector` picks): one TCP port, `port`, to their
    port named `port_name` (or `target_port`)."""
    one_port = {"name": port_name, "port": port, "targetPort": target_port or port_name, "protocol": "TCP"}
    pods = dict(selector) if selector is not None else selector_labels(component)
    body = {"selector": pods, "ports": [one_port], **spec}
    return namespaced("v1", "Service", name, namespace, component, spec=body)


def service_account(name: str, namespace: str, component: str) -> dict[str, Any]:
    """A ServiceAccount whose token no pod gets unless its own spec asks for it
    (`automountServiceAccountToken`), so only a pod that acts through the API holds one."""
    return namespaced("v1", "ServiceAccount", name, namespace, component, automountServiceAccountToken=False)


def cluster_role(name: str, component: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    """A ClusterRole of servescope's."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": cluster_metadata(name, component),
        "rules": rules,
    }


def cluster_role_binding(name: str, component: str, namespace: str) -> dict[str, Any]:
    """The ClusterRoleBinding of the ClusterRole `name` to the ServiceAccount `name` in `namespace`."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": cluster_metadata(name, component),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
