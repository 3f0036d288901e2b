"""The rollout revision of each pod on this node: written by the pod-labels source (from the API server),
read by the engines' source when it labels an engine's serving series with its pod's `revision`."""

from __future__ import annotations

import threading
from collections.abc import Mapping

PodKey = tuple[str, str]  # namespace, pod name


class PodRevisions:
    """(namespace, pod) -> revision, replaced whole by its writer; "" for a pod it does not know."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._revisions: dict[PodKey, str] = {}

    def replace(self, revisions: Mapping[PodKey, str]) -> None:
        with self._lock:
            self._revisions = dict(revisions)

    def revision(self, namespace: str, pod: str) -> str:
        with self._lock:
            return self._revisions.get((namespace, pod), "")

    def __len__(self) -> int:
        with self._lock:
            return len(self._revisions)
