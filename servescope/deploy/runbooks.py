"""The runbook service: Alertmanager's webhook receiver and the runbook pages (Deployment, Service, ...)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import yaml

from servescope.deploy import names
from servescope.deploy.containers import container, restricted_security
from servescope.deploy.names import (
    ALERTMANAGER_SECRETS_DIR,
    CHANGE_TOKEN_KEY,
    EXPORTER,
    HTTP_PORT_NAME,
    RUNBOOKS,
    RUNBOOKS_PORT,
    SECRET,
    STATE_DIR,
    TOKEN_DIR,
    WEBHOOK_TOKEN_KEY,
    labels,
    metadata,
    namespaced,
    nonroot_pod_security,
    selector_labels,
)
from servescope.deploy.options import DeployOptions
from servescope.deploy.scraping import monitor_labels

COMPONENT = "runbooks"
WEBHOOK_TOKEN_FILE = f"{TOKEN_DIR}/{WEBHOOK_TOKEN_KEY}"
CHANGE_TOKEN_FILE = f"{TOKEN_DIR}/{CHANGE_TOKEN_KEY}"
# The pod's grace period, and the part of it the service spends finishing in-flight steps before exiting.
TERMINATION_GRACE_SECONDS = 30
SHUTDOWN_GRACE_SECONDS = 20
# Where Alertmanager (kube-prometheus-stack, alertmanagerSpec.secrets: [servescope-runbooks]) reads the token.
ALERTMANAGER_TOKEN_FILE = f"{ALERTMANAGER_SECRETS_DIR}/{SECRET}/{WEBHOOK_TOKEN_KEY}"
# With --alerts-config the pages show its thresholds: the file travels in a ConfigMap, mounted here.
ALERTS_CONFIG = f"{RUNBOOKS}-alerts-config"
ALERTS_CONFIG_DIR = "/etc/servescope/alerts"
ALERTS_CONFIG_KEY = "config.yaml"


@dataclass(frozen=True)
class RunbookTokens:
    """The two bearer tokens, given at render time only; never written into a kustomize base."""

    webhook: str
    change: str


def service_account(options: DeployOptions) -> dict[str, Any]:
    # Its token is mounted by the runbook Deployment alone (automountServiceAccountToken there): change
    # steps act through the API with the RBAC of runbook_rbac.py.
    return names.service_account(RUNBOOKS, options.namespace, COMPONENT)


def claim(options: DeployOptions) -> dict[str, Any]:
    """The claim keeping incidents and the audit trail across restarts (one writer: ReadWriteOnce)."""
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": options.incidents_storage_size}},
    }
    if options.incidents_storage_class:
        spec["storageClassName"] = options.incidents_storage_class
    return namespaced("v1", "PersistentVolumeClaim", RUNBOOKS, options.namespace, COMPONENT, spec=spec)


def secrets(options: DeployOptions, tokens: RunbookTokens) -> list[dict[str, Any]]:
    """The runbook service's tokens and, when Alertmanager lives elsewhere, its copy of the webhook's."""
    own = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(SECRET, options.namespace, COMPONENT),
        "type": "Opaque",
        "stringData": {WEBHOOK_TOKEN_KEY: tokens.webhook, CHANGE_TOKEN_KEY: tokens.change},
    }
    if options.alertmanager_namespace == options.namespace:
        return [own]
    # Alertmanager mounts Secrets from its own namespace only; it needs the webhook token, not the other.
    theirs = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(SECRET, options.alertmanager_namespace, COMPONENT),
        "type": "Opaque",
        "stringData": {WEBHOOK_TOKEN_KEY: tokens.webhook},
    }
    return [own, theirs]


def alerts_config_text(options: DeployOptions) -> str:
    """The thresholds the rules are rendered with, as the file the runbook service reads."""
    return yaml.safe_dump(options.thresholds().model_dump(mode="json"), sort_keys=False)


def alerts_config_map(options: DeployOptions) -> dict[str, Any]:
    return namespaced(
        "v1",
        "ConfigMap",
        ALERTS_CONFIG,
        options.namespace,
        COMPONENT,
        data={ALERTS_CONFIG_KEY: alerts_config_text(options)},
    )


def _args(options: DeployOptions) -> list[str]:
    config = ["--alerts-config", f"{ALERTS_CONFIG_DIR}/{ALERTS_CONFIG_KEY}"] if options.alerts_config else []
    return [
        "runbook-server",
        "--listen",
        f":{RUNBOOKS_PORT}",
        # Read steps ask the exporter of the alert's node, named by its `instance` label (the node's
        # name); the Service is the fallback for steps run without one. PromQL steps see every node.
        "--exporter-url",
        options.exporter_service_url(),
        "--exporter-per-instance",
        # Only an instance Prometheus scrapes as the exporters' job is asked (or none, fail closed).
        "--exporter-job",
        EXPORTER,
        "--prometheus-url",
        options.prometheus_service_url(),
        "--alertmanager-url",
        options.alertmanager_service_url(),
        "--webhook-token-file",
        WEBHOOK_TOKEN_FILE,
        "--token-file",
        CHANGE_TOKEN_FILE,
        "--incidents-db",
        f"{STATE_DIR}/incidents.sqlite",
        "--audit-log",
        f"{STATE_DIR}/audit.jsonl",
        # Stop within the pod's grace period: in-flight steps finish or are checkpointed, and resumed.
        "--shutdown-grace",
        str(SHUTDOWN_GRACE_SECONDS),
        # `rollback` looks for a canary's workload where the service holds a Role, by the pod labels
        # the revision is read from.
        *(arg for namespace in options.serving_namespaces for arg in ("--serving-namespace", namespace)),
        *(arg for label in options.revision_pod_labels for arg in ("--revision-pod-label", label)),
        # The pages' thresholds: those the rules were rendered with.
        *config,
    ]


def _probe(path: str, initial_delay: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": HTTP_PORT_NAME},
        "initialDelaySeconds": initial_delay,
        "periodSeconds": 10,
        "timeoutSeconds": 3,
        "failureThreshold": 3,
    }


def _container(options: DeployOptions) -> dict[str, Any]:
    return container(
        COMPONENT,
        options,
        _args(options),
        ports=[{"name": HTTP_PORT_NAME, "containerPort": RUNBOOKS_PORT, "protocol": "TCP"}],
        livenessProbe=_probe("/healthz", 10),
        # /readyz fails while incidents cannot be written: Alertmanager's posts go to a replica that can.
        readinessProbe=_probe("/readyz", 2),
        # Measured (tests/faults): VmHWM 124 MiB in the worst case, all 12 step workers (8 for pages, 4
        # for incidents) streaming an endless answer to the 8 MiB cap at once; 58-62 MiB under the large
        # bodies, half-sent connections and 200 concurrent clients. 256Mi keeps twice that worst case.
        resources={"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        securityContext=restricted_security(),
        volumeMounts=[
            {"name": "tokens", "mountPath": TOKEN_DIR, "readOnly": True},
            {"name": "state", "mountPath": STATE_DIR},
            {"name": "tmp", "mountPath": "/tmp"},
            *(
                [{"name": "alerts-config", "mountPath": ALERTS_CONFIG_DIR, "readOnly": True}]
                if options.alerts_config
                else []
            ),
        ],
    )


def _state_volume(options: DeployOptions) -> dict[str, Any]:
    if options.incidents_emptydir:
        return {"name": "state", "emptyDir": {"sizeLimit": "1Gi"}}
    return {"name": "state", "persistentVolumeClaim": {"claimName": options.incidents_pvc or RUNBOOKS}}


def _pod_metadata(options: DeployOptions) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": labels(COMPONENT)}
    if options.alerts_config:
        # The service reads the config at start: a changed config rolls the pod.
        digest = hashlib.sha256(alerts_config_text(options).encode()).hexdigest()[:16]
        meta["annotations"] = {"servescope.io/alerts-config-sha256": digest}
    return meta


def deployment(options: DeployOptions) -> dict[str, Any]:
    pod_spec = {
        "serviceAccountName": RUNBOOKS,
        # The projected ServiceAccount token: change steps act through the Kubernetes API with it.
        "automountServiceAccountToken": True,
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "enableServiceLinks": False,
        # fsGroup makes the claim writable and the token files readable (0440, group fsGroup) for its UID.
        "securityContext": nonroot_pod_security(),
        "containers": [_container(options)],
        "volumes": [
            # Not optional: without the Secret the pod waits (an event names it) instead of starting with a
            # webhook that refuses Alertmanager or change steps that nobody may run.
            {"name": "tokens", "secret": {"secretName": SECRET, "defaultMode": 0o440}},
            _state_volume(options),
            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
            *(
                [{"name": "alerts-config", "configMap": {"name": ALERTS_CONFIG}}]
                if options.alerts_config
                else []
            ),
        ],
    }
    spec = {
        # One writer of the SQLite incident store; two replicas would also run every read step twice.
        "replicas": 1,
        "strategy": {"type": "Recreate"},
        "selector": {"matchLabels": selector_labels(COMPONENT)},
        "template": {"metadata": _pod_metadata(options), "spec": pod_spec},
    }
    return namespaced("apps/v1", "Deployment", RUNBOOKS, options.namespace, COMPONENT, spec=spec)


def service(options: DeployOptions) -> dict[str, Any]:
    return names.service(RUNBOOKS, options.namespace, COMPONENT, HTTP_PORT_NAME, RUNBOOKS_PORT)


def service_monitor(options: DeployOptions) -> dict[str, Any]:
    """The webhook's own series (requests, duplicates, step runs, queue depth) at /incidents/metrics."""
    spec = {
        "selector": {"matchLabels": selector_labels(COMPONENT)},
        "namespaceSelector": {"matchNames": [options.namespace]},
        "endpoints": [
            {"port": HTTP_PORT_NAME, "path": "/incidents/metrics", "interval": options.scrape_interval}
        ],
    }
    return namespaced(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        RUNBOOKS,
        options.namespace,
        COMPONENT,
        extra_labels=monitor_labels(options),
        spec=spec,
    )


def documents(options: DeployOptions, tokens: RunbookTokens | None = None) -> list[dict[str, Any]]:
    """The Secret only when tokens are given: a base must never carry one (see deploy/README.md)."""
    docs = [service_account(options)]
    if not options.incidents_pvc and not options.incidents_emptydir:
        docs.append(claim(options))
    if tokens is not None:
        docs += secrets(options, tokens)
    if options.alerts_config:
        docs.append(alerts_config_map(options))
    return [*docs, deployment(options), service(options), service_monitor(options)]
