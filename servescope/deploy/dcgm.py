"""Where the exporter's DCGM fields come from on Kubernetes, and the one object that needs.

The GPU Operator runs dcgm-exporter on every GPU node (DaemonSet `nvidia-dcgm-exporter`, pod label
app=nvidia-dcgm-exporter, port 9400) with neither hostNetwork nor a hostPort, behind a ClusterIP Service
that load-balances across nodes. A second Service over the same pods with internalTrafficPolicy: Local
sends each exporter to the dcgm-exporter of its own node only; where a node has none, the connection
fails and the exporter's DCGM source says so, on that node.
"""

from __future__ import annotations

from typing import Any

from servescope.core.settings_cli import env_names
from servescope.deploy.names import service
from servescope.deploy.options import DeployOptions
from servescope.exporter.settings import DcgmSettings

SERVICE = "servescope-dcgm-exporter"
OPERATOR_DCGM_EXPORTER_LABELS = {"app": "nvidia-dcgm-exporter"}
DCGM_EXPORTER_PORT = 9400
# The GPU Operator's standalone host engine (`dcgm.enabled: true`): Service nvidia-dcgm, port 5555.
OPERATOR_HOST_ENGINE = "nvidia-dcgm"


def operator_url(options: DeployOptions) -> str:
    return f"http://{SERVICE}.{options.gpu_operator_namespace}.svc:{DCGM_EXPORTER_PORT}/metrics"


def host_engine(options: DeployOptions) -> str:
    """The host engine the image's dcgmi reads: --dcgm-host, else the GPU Operator's standalone one."""
    return options.dcgm_host or f"{OPERATOR_HOST_ENGINE}.{options.gpu_operator_namespace}.svc:5555"


def exporter_env(options: DeployOptions) -> list[dict[str, Any]]:
    """The exporter's DCGM settings for the chosen source."""
    if options.dcgm == "off":
        return [{"name": env_names(DcgmSettings, "enabled")[0], "value": "false"}]
    if options.dcgm == "dcgmi":
        return [{"name": env_names(DcgmSettings, "host")[0], "value": host_engine(options)}]
    url = {"gpu-operator": operator_url(options), "exporter-url": options.dcgm_exporter_url}[options.dcgm]
    return [{"name": env_names(DcgmSettings, "exporter_url")[0], "value": url}]


def node_local_service(options: DeployOptions) -> dict[str, Any]:
    """A Service in the Operator's namespace over its dcgm-exporter pods, answering on the same node only."""
    return service(
        SERVICE,
        options.gpu_operator_namespace,
        "dcgm",
        "metrics",
        DCGM_EXPORTER_PORT,
        selector=OPERATOR_DCGM_EXPORTER_LABELS,
        target_port=DCGM_EXPORTER_PORT,
        internalTrafficPolicy="Local",
    )


def documents(options: DeployOptions) -> list[dict[str, Any]]:
    return [node_local_service(options)] if options.dcgm == "gpu-operator" else []
