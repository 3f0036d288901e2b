"""A fake Kubernetes API server for tests (see `server.py`), in-process or as a process of its own."""

from tests.support.kube.errors import ApiStatusError
from tests.support.kube.rbac import Rbac, Request
from tests.support.kube.server import FakeApi, serve, status
from tests.support.kube.store import Store

__all__ = ["ApiStatusError", "FakeApi", "Rbac", "Request", "Store", "serve", "status"]
