"""What kube-state-metrics says about the cluster, as PromQL the rules join on: GPU nodes, pods that are
being deleted, and the Deployments behind a model's pods.

A planned change (a rollout, a scale-down, a pod moved to another node) deletes pods; Kubernetes says so
before and while the engine goes away. These pieces let the rules tell that apart from an engine that
should serve and does not. Every one of them is empty without kube-state-metrics: the rules that use them
then fall back to what the engines' own series say (`kube_state_metrics: false` leaves them out).
"""

from __future__ import annotations

from servescope.core.config import AlertsConfig
from servescope.core.topology import podmonitor

# How far back a model's pods say which Deployments serve it: a Deployment whose pods are all gone (none
# could be scheduled) still belongs to the model it served a day ago.
DEPLOYMENT_MEMORY = "1d"
MODEL_DEPLOYMENTS = "model:servescope_deployments:info"


def ksm(cfg: AlertsConfig, name: str, *matchers: str) -> str:
    """`name{<kube-state-metrics selector>,<matchers>}`."""
    inner = ",".join(m for m in (cfg.kube_state_metrics_selector, *matchers) if m)
    return f"{name}{{{inner}}}"


def gpu_nodes(cfg: AlertsConfig) -> str:
    """One series per GPU node (label `node`): nvidia.com/gpu capacity, or the GPU Operator's node label."""
    capacity = ksm(cfg, "kube_node_status_capacity", 'resource="nvidia_com_gpu"') + " > 0"
    labelled = ksm(cfg, "kube_node_labels", f'{cfg.gpu_node_label}="true"')
    return f"group by (node) ({capacity} or {labelled})"


def terminating(cfg: AlertsConfig, within: str) -> str:
    """Pods being deleted at any time `within` (namespace, pod): their engines stop on purpose."""
    return f"group by (namespace, pod) (last_over_time({ksm(cfg, 'kube_pod_deletion_timestamp')}[{within}]))"


def model_pods(cfg: AlertsConfig, models: str) -> str:
    """(model_name, namespace, pod) of every engine pod; `models` is an engine series with model_name."""
    if podmonitor(cfg):
        return f"group by (model_name, namespace, pod) ({models})"
    # The exporter names an endpoint's pod (the one container holding all its GPUs).
    info = f"servescope_serving_endpoint_pod_info{{{cfg.selector}}}"
    pods = f"max by (instance, endpoint, namespace, pod) ({info})"
    named = f"group by (instance, endpoint, model_name) ({models})"
    # The models on the left: one endpoint may serve several, and has one pod.
    joined = f"{named} * on (instance, endpoint) group_left (namespace, pod) {pods}"
    return f"group by (model_name, namespace, pod) ({joined})"


def model_deployments(cfg: AlertsConfig, models: str) -> str:
    """(model_name, namespace, deployment) of the Deployments whose ReplicaSets own the model's pods."""
    owner = ksm(cfg, "kube_pod_owner", 'owner_kind="ReplicaSet"')
    replicaset = ksm(cfg, "kube_replicaset_owner", 'owner_kind="Deployment"')
    pod_rs = f'label_replace({owner}, "replicaset", "$1", "owner_name", "(.+)")'
    rs_deploy = f'label_replace({replicaset}, "deployment", "$1", "owner_name", "(.+)")'
    pod_deploy = (
        f"max by (namespace, pod, deployment) ({pod_rs} * on (namespace, replicaset) group_left (deployment) "
        f"max by (namespace, replicaset, deployment) ({rs_deploy}))"
    )
    pods = model_pods(cfg, models)
    joined = f"{pods} * on (namespace, pod) group_left (deployment) {pod_deploy}"
    return f"group by (model_name, namespace, deployment) ({joined})"


def model_replicas_unavailable(cfg: AlertsConfig) -> str:
    """Unavailable replicas of each model's Deployments (per model_name): what the Deployment still
    wants and does not have. A scale-down lowers what it wants: nothing is unavailable then."""
    unavailable = ksm(cfg, "kube_deployment_status_replicas_unavailable")
    known = f"max_over_time({MODEL_DEPLOYMENTS}[{DEPLOYMENT_MEMORY}])"
    return f"sum by (model_name) ({unavailable} * on (namespace, deployment) group_left (model_name) {known})"
