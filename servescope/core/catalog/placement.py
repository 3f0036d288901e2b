"""Where the work runs: which pod holds which GPU (kubelet pod-resources), which engines discovery found.

Kept apart from the collected series of the catalog's main module; the catalog lists both.
"""

from __future__ import annotations

from servescope.core.catalog.revision import REVISION_LABEL
from servescope.core.catalog.spec import GPU_LABELS, POD_LABELS, MetricSpec
from servescope.core.catalog.spec import gauge as _gauge

POD = POD_LABELS

GPU_POD_INFO = _gauge(
    "servescope_gpu_pod_info",
    "The pod and container a GPU is allocated to, from the kubelet's pod-resources API (value is "
    "always 1; a time-sliced or MIG-partitioned GPU has one series per container holding a share).",
    (*GPU_LABELS, *POD),
    "k8s",
)
GPU_PROCESS_POD_INFO = _gauge(
    "servescope_gpu_process_pod_info",
    "The pod and container of a GPU compute process (join on uuid, pid): set where exactly one "
    "container holds the GPU; absent for a GPU shared by several (value is always 1).",
    (*GPU_LABELS, "pid", *POD),
    "k8s",
)
GPU_MIG_POD_INFO = _gauge(
    "servescope_gpu_mig_pod_info",
    "The pod and container holding a MIG slice (the mixed strategy's nvidia.com/mig-<profile> resources): "
    "the slice's MIG UUID (or the kubelet's legacy MIG-GPU-<uuid>/<gi>/<ci> ID) and its GPU and compute "
    "instance, on its parent GPU (gpu, uuid); value is always 1.",
    (*GPU_LABELS, "mig_uuid", "gpu_instance", "compute_instance", *POD),
    "k8s",
)
ALLOCATABLE_DEVICES = _gauge(
    "servescope_k8s_allocatable_devices",
    "Devices the kubelet can allocate on this node, by resource (GetAllocatableResources).",
    ("resource",),
    "k8s",
)
ENDPOINT_POD_INFO = _gauge(
    "servescope_serving_endpoint_pod_info",
    "The pod and container of a serving endpoint: the one container the kubelet says holds all of "
    "its engines' GPUs (absent when unknown or several), and the pod's rollout revision when the API server "
    "says (value is always 1).",
    ("endpoint", *POD, REVISION_LABEL),
    "vllm",
)
DISCOVERED_ENDPOINTS = _gauge(
    "servescope_vllm_discovered_endpoints",
    "Serving endpoints discovery found on this node in its last cycle (0: it found none; the "
    "exporter's log says what it looked at).",
    (),
    "vllm",
)

PLACEMENT: tuple[MetricSpec, ...] = tuple(v for v in list(globals().values()) if isinstance(v, MetricSpec))
