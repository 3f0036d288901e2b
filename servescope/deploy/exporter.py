"""The per-node exporter: Namespace, ServiceAccount, DaemonSet and Service."""

from __future__ import annotations

from typing import Any

from servescope.core.settings_cli import env_names
from servescope.deploy import dcgm, names, revision
from servescope.deploy.containers import container, restricted_security
from servescope.deploy.names import (
    EXPORTER,
    EXPORTER_PORT,
    METRICS_PORT_NAME,
    NONROOT_UID,
    labels,
    namespaced,
    selector_labels,
)
from servescope.deploy.options import DeployOptions
from servescope.exporter.vllm.settings import VllmSettings

COMPONENT = "exporter"
# Where the container sees the kubelet's pod-resources folder (--kubelet-root's on the node): the
# exporter's default --pod-resources-socket, so no setting is needed whatever the node's root.
POD_RESOURCES = "/var/lib/kubelet/pod-resources"
# What engine-to-GPU attribution reads under /proc (exporter/vllm/procfs.py): <pid>/stat (readable by
# anyone), <pid>/net/tcp (the engine's own network namespace), and <pid>/fd, which only its owner may list
# (else DAC_READ_SEARCH) and whose socket links need ptrace read access (same UID and capabilities, else
# SYS_PTRACE). Engines commonly run as root with every capability, hence UID 0 plus these two.
# Capabilities given to a non-root UID never become effective (Kubernetes sets no ambient set), so a
# non-root exporter cannot have them: attribution means root, without any other capability.
ATTRIBUTION_CAPABILITIES = ["DAC_READ_SEARCH", "SYS_PTRACE"]
# Request: the normal footprint, at most 72 MiB RSS, flat after minute 2, with 8 simulated GPUs and 4
# engines (bench/results/footprint.md). Limit: the worst case, measured as the peak RSS (VmHWM) of
# `serve --no-nvml --no-dcgm` scraping, every 3 s for 60 s, a healthy engine, the largest page accepted
# (4 MiB, the --vllm-max-bytes default) and three engines sending more (no length, endless chunks, a gzip
# bomb): 172-244 MiB over several runs, the highest with the CPU contended (slower parsing holds more
# pages at once). 244 MiB is 64 % of 384 Mi; tests/faults/test_large_bodies.py re-measures it and holds
# it under 75 % of this limit.
EXPORTER_MEMORY_REQUEST = "128Mi"
EXPORTER_MEMORY_LIMIT = "384Mi"
EXPORTER_CPU_REQUEST = "50m"


def namespace(options: DeployOptions) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": options.namespace}
    if options.runs_as_root or options.host_network:
        # hostPID, hostPath volumes and added capabilities are refused by the baseline and restricted
        # Pod Security levels; the namespace is servescope's own, so the level is granted to it alone.
        meta["labels"] = {"pod-security.kubernetes.io/enforce": "privileged"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def service_account(options: DeployOptions) -> dict[str, Any]:
    # Tokens are not mounted by default: only the pods of an exporter that watches its node's pods get one
    # (_pod_spec), and its ClusterRole grants nothing else (revision.py).
    return names.service_account(EXPORTER, options.namespace, COMPONENT)


def _security(options: DeployOptions) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod's and the container's security contexts."""
    seccomp = {"type": "RuntimeDefault"}
    context = restricted_security()
    if options.host_pid:
        context["capabilities"]["add"] = list(ATTRIBUTION_CAPABILITIES)
        # Reading other processes' fd/ is a ptrace read check, which containerd's default AppArmor profile
        # refuses on Ubuntu nodes (discovery then says ptrace_denied); seccomp has no say in it.
        context["appArmorProfile"] = options.apparmor_spec()
    if options.runs_as_root:
        # The kubelet's socket is root's (mode 0755 under the kubelet's umask): UID 0 connects to it as its
        # owner, with no capability; other processes' /proc entries take the two above as well.
        pod = {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False, "seccompProfile": seccomp}
    else:
        # NVML alone needs no privilege: the NVIDIA runtime mounts /dev/nvidia* readable by everyone.
        pod = {
            "runAsUser": NONROOT_UID,
            "runAsGroup": NONROOT_UID,
            "runAsNonRoot": True,
            "seccompProfile": seccomp,
        }
    return pod, context


def _setting(model: type[Any], field: str, value: str) -> dict[str, Any]:
    return {"name": env_names(model, field)[0], "value": value}


def _env(options: DeployOptions) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        # The exporter's `hostname` label: the Kubernetes node name, as the alerts and dashboards expect.
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        # For URLs of services on the same node, e.g. --dcgm-exporter-url http://$(NODE_IP):9400/metrics.
        {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
        # The NVIDIA container toolkit mounts the driver's libnvidia-ml and the device nodes for these, with
        # no `nvidia.com/gpu` request: the exporter watches every GPU and takes none from the workloads.
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
    ]
    if options.topology == "exporter":
        # Prometheus scrapes the engines too (a PodMonitor of your own, or vLLM's chart): their raw series
        # would be stored twice. The exporter's normalised servescope_serving_* series are what rules use.
        env.append(_setting(VllmSettings, "passthrough", str(options.passthrough).lower()))
    else:
        # Prometheus scrapes the engines through the PodMonitor; the exporter adds GPU series only.
        env.append(_setting(VllmSettings, "discovery", "false"))
    return env + revision.exporter_env(options) + dcgm.exporter_env(options)


def exporter_settings(options: DeployOptions) -> dict[str, str]:
    """The exporter's SERVESCOPE_* settings the DaemonSet sets to literal values (for running the same
    configuration outside Kubernetes: benchmarks and end-to-end tests)."""
    env = _env(options)
    return {e["name"]: e["value"] for e in env if e["name"].startswith("SERVESCOPE_") and "value" in e}


def _probe(path: str) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": METRICS_PORT_NAME},
        "periodSeconds": 10,
        "timeoutSeconds": 3,
        "failureThreshold": 3,
    }


def _container(options: DeployOptions, security: dict[str, Any]) -> dict[str, Any]:
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    if options.pod_resources:
        # The exporter's default --pod-resources-socket is kubelet.sock in this folder: no setting needed.
        mounts.append({"name": "pod-resources", "mountPath": POD_RESOURCES, "readOnly": True})
    return container(
        COMPONENT,
        options,
        ["serve", "--listen", f":{EXPORTER_PORT}"],
        env=_env(options),
        ports=[{"name": METRICS_PORT_NAME, "containerPort": EXPORTER_PORT, "protocol": "TCP"}],
        livenessProbe={**_probe("/healthz"), "initialDelaySeconds": 10},
        # 503 until every source has succeeded once; the Service still publishes not-ready pods, so a
        # node whose driver is broken is scraped and says why (servescope_source_up 0, with a reason).
        readinessProbe=_probe("/readyz"),
        # No CPU limit: CFS throttling would stall the 1 s collection loops, and the request already sets
        # the exporter's share under contention.
        resources={
            "requests": {"cpu": EXPORTER_CPU_REQUEST, "memory": EXPORTER_MEMORY_REQUEST},
            "limits": {"memory": EXPORTER_MEMORY_LIMIT},
        },
        securityContext=security,
        volumeMounts=mounts,
    )


def _pod_spec(options: DeployOptions) -> dict[str, Any]:
    pod_security, container_security = _security(options)
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    if options.pod_resources:
        # The kubelet's pod-resources API says which pod holds which GPU (the socket, read-only).
        host_folder = f"{options.kubelet_root}/pod-resources"
        volumes.append({"name": "pod-resources", "hostPath": {"path": host_folder, "type": "Directory"}})
    spec: dict[str, Any] = {
        "serviceAccountName": EXPORTER,
        # A token only to list and watch the node's pods (their revisions), nothing else (revision.py).
        "automountServiceAccountToken": options.exporter_watches_pods,
        "enableServiceLinks": False,
        "nodeSelector": dict(options.node_selector),
        # GPU node pools are usually tainted so that only GPU workloads land there; the exporter must too.
        "tolerations": options.toleration_specs(),
    }
    affinity = options.node_affinity_spec()
    if affinity is not None:
        spec["affinity"] = affinity
    if options.priority_class:
        # A node's monitoring must not be the pod evicted first when the node runs short.
        spec["priorityClassName"] = options.priority_class
    if options.runtime_class:
        # Under CDI (GPU Operator v25.10+) only the nvidia runtime class injects the driver and devices.
        spec["runtimeClassName"] = options.runtime_class
    if options.host_pid:
        spec["hostPID"] = True  # NVML reports host PIDs; only the host's /proc knows them
    if options.host_network:
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    spec["terminationGracePeriodSeconds"] = 10
    spec["securityContext"] = pod_security
    spec["containers"] = [_container(options, container_security)]
    spec["volumes"] = volumes
    return spec


def daemonset(options: DeployOptions) -> dict[str, Any]:
    spec = {
        "selector": {"matchLabels": selector_labels(COMPONENT)},
        # One node in ten at a time: a bad image stops a rollout before most nodes lose their exporter.
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
        "template": {"metadata": {"labels": labels(COMPONENT)}, "spec": _pod_spec(options)},
    }
    return namespaced("apps/v1", "DaemonSet", EXPORTER, options.namespace, COMPONENT, spec=spec)


def service(options: DeployOptions) -> dict[str, Any]:
    # An exporter that is not ready (a source never succeeded) must still be scraped: its /metrics is
    # what says which source failed and why.
    return names.service(
        EXPORTER,
        options.namespace,
        COMPONENT,
        METRICS_PORT_NAME,
        EXPORTER_PORT,
        publishNotReadyAddresses=True,
    )


def documents(options: DeployOptions) -> list[dict[str, Any]]:
    docs = [service_account(options), daemonset(options), service(options), *dcgm.documents(options)]
    docs += revision.exporter_rbac(options)
    return ([namespace(options)] if options.create_namespace else []) + docs
