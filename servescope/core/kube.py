"""The Kubernetes API client of servescope: lightkube, configured from the pod or from a kubeconfig/URL.

Why lightkube: its resources are typed models (mypy strict checks a Node patch, a Pod eviction, a
Deployment's Scale subresource like any other code), subresources such as eviction and scale are typed
calls, it is small (a few pure-Python packages, no generated client of thousands of modules, no
kubectl), and it speaks HTTP through httpx like the rest of servescope.

Where the API is, in order: an explicit URL with a bearer-token file (tests, or a service outside the
cluster), a kubeconfig file, else the pod's own ServiceAccount (the token the kubelet mounts and rotates,
the cluster's CA, KUBERNETES_SERVICE_HOST), else $KUBECONFIG or ~/.kube/config.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import httpx2
from lightkube import ApiError, Client, KubeConfig
from lightkube.config import client_adapter
from lightkube.config.models import Cluster, User
from lightkube.core.exceptions import ConfigError

from servescope.core.errors import ServescopeError

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
FIELD_MANAGER = "servescope-runbooks"

__all__ = [
    "ApiError",
    "KubeAccess",
    "KubeConfigError",
    "client",
    "close_clients",
    "describe_api_error",
    "http_client",
]


class KubeConfigError(ServescopeError, RuntimeError):
    """No way to reach the Kubernetes API was found; the message says what was tried."""

    reason = "kube_config"


@dataclass(frozen=True)
class KubeAccess:
    """How to reach the API server; all empty: the pod's ServiceAccount, else the kubeconfig."""

    api_url: str | None = None
    token_file: str | None = None
    ca_file: str | None = None
    kubeconfig: str | None = None
    timeout_seconds: float = 10.0

    def describe(self) -> str:
        if self.api_url:
            return f"the API server at {self.api_url}"
        if self.kubeconfig:
            return f"the API server of kubeconfig {self.kubeconfig}"
        return "the API server of this pod's ServiceAccount (or $KUBECONFIG)"


def _config(access: KubeAccess) -> KubeConfig:
    if access.api_url:
        user = User(token_file=access.token_file) if access.token_file else User()  # no token: anonymous
        return KubeConfig.from_one(
            cluster=Cluster(server=access.api_url, certificate_auth=access.ca_file), user=user
        )
    if access.kubeconfig:
        return KubeConfig.from_file(access.kubeconfig)
    return KubeConfig.from_env(service_account=SERVICE_ACCOUNT_DIR)


_clients: dict[KubeAccess, Client] = {}
_lock = threading.Lock()


def client(access: KubeAccess) -> Client:
    """One client per way of access (its connection pool is kept); KubeConfigError when none works."""
    with _lock:
        found = _clients.get(access)
        if found is not None:
            return found
        try:
            found = Client(
                _config(access),
                timeout=httpx2.Timeout(access.timeout_seconds),
                trust_env=False,  # no environment proxy between the service and its API server
                field_manager=FIELD_MANAGER,
            )
        except (ConfigError, OSError, KeyError) as exc:
            raise KubeConfigError(f"cannot reach {access.describe()}: {exc}") from None
        _clients[access] = found
        return found


def http_client(access: KubeAccess, timeout: httpx2.Timeout) -> httpx2.Client:
    """An HTTP client of the API server configured as lightkube's are (address, CA, the token re-read
    when the kubelet rotates it), for requests its Client does not make: a list and a watch of object
    metadata only, with bookmarks (exporter/k8s/pod_labels.py). Not shared: its owner closes it."""
    try:
        params = client_adapter.ConnectionParams(timeout=timeout, trust_env=False)
        config = _config(access).get()
        if config is None:
            raise ConfigError("the kubeconfig names no current context")
        return client_adapter.Client(config, params)
    except (ConfigError, OSError, KeyError) as exc:
        raise KubeConfigError(f"cannot reach {access.describe()}: {exc}") from None


def close_clients() -> None:
    """Close every client made (their connections); the next call of `client` makes a new one."""
    with _lock:
        for made in _clients.values():
            made.close()
        _clients.clear()


def describe_api_error(error: ApiError) -> str:
    """The API server's Status as one line: code, reason, message."""
    status = error.status
    return f"HTTP {status.code} {status.reason or ''}: {status.message or ''}".replace("  ", " ")
