"""What a cluster admin chooses for the runbook service: where it may act, where it keeps its state."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import AfterValidator

from servescope.core.settings_cli import FixedOptions, repeated, setting
from servescope.deploy.checks import DnsLabel, OptionalObjectName

QUANTITY = r"^[0-9]+(Ki|Mi|Gi|Ti)$"
Cidr = Annotated[str, AfterValidator(lambda cidr: str(ipaddress.ip_network(cidr, strict=False)))]


class RunbookDeployOptions(FixedOptions):
    """The runbook service's RBAC scope, API server egress and state volume."""

    serving_namespaces: list[DnsLabel] = repeated(
        list,
        "--serving-namespace",
        "Namespace of serving workloads the runbook service may scale and roll back (repeatable): each gets "
        "a Role and RoleBinding (deployments/scale get and patch, autoscalers list; for rollback: "
        "replicasets list, deployments and Argo rollouts get and patch, rollouts/status patch), and the "
        "service looks for a canary's workload there. None: scale_deployment and rollback steps are "
        "refused (403, or no namespace to look in).",
    )
    api_server_cidrs: list[Cidr] = repeated(
        lambda: ["0.0.0.0/0"],
        "--api-server-cidr",
        "CIDR of the Kubernetes API server's endpoints, for the runbook service's egress NetworkPolicy "
        "(repeatable). The default lets it reach ports 443 and 6443 of any address: narrow it to your "
        "control plane's (kubectl get endpoints kubernetes).",
    )
    incidents_pvc: OptionalObjectName = setting(
        "",
        "--incidents-pvc",
        "An existing PersistentVolumeClaim keeping the runbook service's incidents and audit trail. Empty: "
        "a claim of its own is rendered (servescope-runbooks, --incidents-storage-size, "
        "--incidents-storage-class).",
    )
    incidents_storage_class: OptionalObjectName = setting(
        "",
        "--incidents-storage-class",
        "StorageClass of the rendered claim. Empty: the cluster's default StorageClass.",
    )
    incidents_storage_size: str = setting(
        "2Gi", "--incidents-storage-size", "Size of the rendered claim (Ki, Mi, Gi or Ti).", pattern=QUANTITY
    )
    incidents_emptydir: bool = setting(
        False,
        "--incidents-emptydir/--no-incidents-emptydir",
        "Keep incidents and the audit trail on an emptyDir instead (lost with the pod: every rollout, "
        "eviction or OOM kill loses them). For trying servescope out only; `deploy render` warns.",
    )

    def state_warning(self) -> str | None:
        """What `deploy render` says when the state is not kept."""
        if not self.incidents_emptydir:
            return None
        return (
            "warning: --incidents-emptydir: the runbook service keeps its incidents and audit trail on an "
            "emptyDir, lost whenever its pod goes (rollout, eviction, OOM kill)"
        )
