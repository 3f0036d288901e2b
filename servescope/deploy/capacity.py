"""The weekly capacity CronJob: `servescope capacity weekly` against one staging endpoint.

Its baseline and past runs live on a PersistentVolumeClaim (a ConfigMap would cap them at 1 MiB and
need API rights to write); its result goes to Prometheus by remote write (capacity/remote_write.py says
why). It needs no Kubernetes API (no token is mounted), one concurrent run at most, and egress to DNS,
the staging endpoint's port and Prometheus only.
"""

from __future__ import annotations

import shlex
from typing import Any
from urllib.parse import urlsplit

from servescope.deploy.agent_options import REMOTE_WRITE_PATH
from servescope.deploy.containers import container, restricted_security
from servescope.deploy.names import (
    NAMESPACE_NAME_LABEL,
    labels,
    namespaced,
    nonroot_pod_security,
    selector_labels,
    service_account,
)
from servescope.deploy.options import DeployOptions

COMPONENT = "capacity"
NAME = "servescope-capacity"
STATE = "/var/lib/servescope/capacity"
# A search at the defaults takes tens of minutes; a Job still running after this is stopped.
DEADLINE_S = 6 * 3600


def remote_write_url(options: DeployOptions) -> str:
    return (
        options.capacity_remote_write_url or options.prometheus_service_url().rstrip("/") + REMOTE_WRITE_PATH
    )


def args(options: DeployOptions) -> list[str]:
    slos = [item for slo in options.capacity_slo for item in ("--slo", slo)]
    return [
        "capacity",
        "weekly",
        "--url",
        options.capacity_url,
        "--target",
        options.capacity_target,
        "--label",
        options.capacity_target,
        "--state-dir",
        STATE,
        "--remote-write-url",
        remote_write_url(options),
        *slos,
        *shlex.split(options.capacity_args),
    ]


def _container(options: DeployOptions) -> dict[str, Any]:
    return container(
        COMPONENT,
        options,
        args(options),
        # The load client needs a core to itself to keep its schedule (it says so when it cannot).
        resources={"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        securityContext=restricted_security(),
        volumeMounts=[{"name": "state", "mountPath": STATE}, {"name": "tmp", "mountPath": "/tmp"}],
    )


def cron_job(options: DeployOptions) -> dict[str, Any]:
    claim = options.capacity_pvc or NAME
    pod = {
        "serviceAccountName": NAME,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "restartPolicy": "Never",
        "securityContext": nonroot_pod_security(),
        "containers": [_container(options)],
        "volumes": [
            {"name": "state", "persistentVolumeClaim": {"claimName": claim}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
        ],
    }
    job = {
        "backoffLimit": 0,  # a run that failed is a result to read, not to repeat for hours
        "activeDeadlineSeconds": DEADLINE_S,
        "template": {"metadata": {"labels": labels(COMPONENT)}, "spec": pod},
    }
    spec = {
        "schedule": options.capacity_schedule,
        "concurrencyPolicy": "Forbid",  # one load on the staging endpoint at a time
        "startingDeadlineSeconds": 3600,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 3,
        "jobTemplate": {"spec": job},
    }
    return namespaced("batch/v1", "CronJob", NAME, options.namespace, COMPONENT, spec=spec)


def claim(options: DeployOptions) -> dict[str, Any]:
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    return namespaced("v1", "PersistentVolumeClaim", NAME, options.namespace, COMPONENT, spec=spec)


def _port(url: str) -> int:
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def network_policy(options: DeployOptions) -> dict[str, Any]:
    """No ingress; egress to DNS, the staging endpoint's port (anywhere: it may live outside the
    cluster) and Prometheus's pods."""
    prometheus = {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: options.prometheus_namespace}},
        "podSelector": {"matchLabels": dict(options.prometheus_pod_labels)},
    }
    egress = [
        {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
        {"ports": [{"protocol": "TCP", "port": _port(options.capacity_url)}]},
        {"to": [prometheus], "ports": [{"protocol": "TCP", "port": _port(remote_write_url(options))}]},
    ]
    spec = {
        "podSelector": {"matchLabels": selector_labels(COMPONENT)},
        "policyTypes": ["Ingress", "Egress"],
        "egress": egress,
    }
    return namespaced("networking.k8s.io/v1", "NetworkPolicy", NAME, options.namespace, COMPONENT, spec=spec)


def documents(options: DeployOptions) -> list[dict[str, Any]]:
    if not options.capacity_url:
        return []
    account = service_account(NAME, options.namespace, COMPONENT)
    own_claim = [] if options.capacity_pvc else [claim(options)]
    return [account, *own_claim, cron_job(options), network_policy(options)]
