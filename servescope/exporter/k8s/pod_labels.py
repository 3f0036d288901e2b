"""Source `pod-labels`: the rollout revision of each pod on this node, from the Kubernetes API server.

The kubelet's pod-resources API names the pod holding each GPU, not its labels. Where a revision comes
from, and why the API server:

- **A list and a watch of this node's pods** (`fieldSelector=spec.nodeName=<node>`, metadata only,
  pod_watch.py) read the very labels the PodMonitor topology relabels (`--revision-pod-label`, the first
  the pod carries wins), as the controllers set them, with no change to the engines' pods; a watch sees a
  pod relabelled in place (Argo Rollouts' canary/stable metadata) within a second. It costs one long-lived
  request per node, served from the API server's watch cache as the kubelet's own, and RBAC: list and
  watch on pods, cluster-wide, because RBAC cannot grant a field-selected list (a rule names resources
  and verbs, never a selector) and the node's pods are in every namespace.
- A label handed to the engine's container (the downward API into an environment variable, read from
  /proc/<pid>/environ) needs no RBAC, but every engine pod template must be changed to carry it, the
  environment is fixed at the container's start (a relabel is never seen) and the label order would be
  written into each pod instead of configured once.

How it follows the pods: one list (its resourceVersion), then watches from the last resourceVersion seen,
each ended by the API server after 5 to 10 minutes and started again at once; bookmarks keep the
resourceVersion current on a quiet node. A watch refused as too old (410) is followed by a new list, as
client-go's reflector does. Every other failure is counted by reason, logged when it begins, and tried
again after 1 s, then up to 60 s. While it lasts the revisions last known stay for STALE_SECONDS (an API
server restart does not turn every engine's series into new ones), then are dropped and the source is
down: the label is absent rather than possibly wrong (a StatefulSet's pod keeps its name across
revisions). Nothing here blocks another source: it runs on its own thread, and the engines' source only
reads the last revisions written.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx2

from servescope.core.catalog.revision import revision_of
from servescope.core.kube import KubeConfigError, http_client
from servescope.exporter.k8s.pod_watch import Event, ExpiredError, PodMeta, WatchError, list_pods, watch_pods
from servescope.exporter.k8s.settings import K8sSettings
from servescope.exporter.sources.base import Collection, Problem, SourceError
from servescope.exporter.stores.pod_revisions import PodKey, PodRevisions

log = logging.getLogger(__name__)

STALE_SECONDS = 300.0
MIN_BACKOFF_SECONDS, MAX_BACKOFF_SECONDS = 1.0, 60.0
WATCH_SECONDS = (300, 600)  # the API server ends each watch after this long (client-go's spread)
FIRST_LIST_WAIT_SECONDS = 5.0  # the first collection waits this long for the first list
MAX_PODS = 1024  # kubelets run 110 pods by default and a few hundred at most


class PodLabelsSource:
    """Lists and watches this node's pods on a thread; each collection reports how that goes."""

    name = "pod-labels"
    optional = True  # revisions enrich the engines' series: without them the exporter still serves them

    def __init__(
        self,
        node: str,
        order: Sequence[str],
        revisions: PodRevisions,
        connect: Callable[[], httpx2.Client],
        *,
        interval_seconds: float = 15.0,
        watch_seconds: tuple[int, int] = WATCH_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval_seconds = interval_seconds
        self._node, self._order, self._revisions = node, tuple(order), revisions
        self._connect, self._watch_seconds, self._monotonic = connect, watch_seconds, monotonic
        self._lock = threading.Lock()
        self._pods: dict[PodKey, str] = {}  # every pod of the node -> its revision ("" for none)
        self._version = ""
        self._known_since: float | None = None  # when the pods were last known to be current
        self._failing: WatchError | None = None  # the failure in progress, if any
        self._failing_since = 0.0
        self._problems: list[Problem] = []  # failures since the last collection
        self._stop = threading.Event()
        self._first = threading.Event()  # the first list answered (or failed)
        self._thread: threading.Thread | None = None
        self._client: httpx2.Client | None = None

    # --- the source --------------------------------------------------------------------------------
    def collect(self) -> Collection:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="pod-labels", daemon=True)
            self._thread.start()
            self._first.wait(FIRST_LIST_WAIT_SECONDS)
        with self._lock:
            problems, self._problems = self._problems, []
            failing, stale = self._failing, self._stale()
            report: dict[str, object] = {
                "node": self._node,
                "pods": len(self._pods),
                "with_revision": sum(1 for revision in self._pods.values() if revision),
                "resource_version": self._version,
            }
        if stale:
            self._revisions.replace({})  # no longer known: absent rather than possibly wrong
            if failing is None:
                raise SourceError("starting", f"no list of the pods of node {self._node} yet")
            raise SourceError(failing.reason, str(failing))
        return Collection([], problems, report=report)

    def close(self) -> None:
        # The thread stops at its next event, or when the API server ends the watch: closing its
        # connection from here could block behind the read it is in.
        self._stop.set()

    def _stale(self) -> bool:
        if self._known_since is None:
            return True
        return self._failing is not None and self._monotonic() - self._failing_since > STALE_SECONDS

    # --- the thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._loop()
        finally:
            if self._client is not None:
                self._client.close()

    def _loop(self) -> None:
        backoff, version, consistent = MIN_BACKOFF_SECONDS, "", False
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._list(consistent)
                    backoff, consistent = MIN_BACKOFF_SECONDS, False
                began = self._monotonic()
                version = self._follow(version)
                if self._monotonic() - began < MIN_BACKOFF_SECONDS:  # a server ending every watch at once
                    self._stop.wait(MIN_BACKOFF_SECONDS)
                continue
            except ExpiredError as exc:
                log.info("pods of node %s: %s; listing them again", self._node, exc)
                version, consistent = "", True
                continue
            except WatchError as exc:
                self._failed(exc)
            except KubeConfigError as exc:
                self._failed(WatchError("config", str(exc)))
            except Exception as exc:  # isolation: a bug here must not end the thread for good
                log.exception("pods of node %s: unexpected failure", self._node)
                self._failed(WatchError("internal", f"{type(exc).__name__}: {exc}"))
            self._first.set()
            self._stop.wait(backoff * random.uniform(0.8, 1.2))
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    def _http(self) -> httpx2.Client:
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _list(self, consistent: bool) -> str:
        pods, version = list_pods(self._http(), self._node, consistent=consistent)
        if len(pods) > MAX_PODS:
            raise WatchError(
                "too_many_pods", f"node {self._node} lists {len(pods)} pods (at most {MAX_PODS})"
            )
        with self._lock:
            self._pods = {(pod.namespace, pod.name): self._revision(pod) for pod in pods}
            self._version = version
        self._healthy()
        self._publish()
        self._first.set()
        log.info("pods of node %s listed: %d, at resourceVersion %s", self._node, len(pods), version)
        return version

    def _follow(self, version: str) -> str:
        """One watch, until the API server ends it: the resourceVersion to go on from."""
        seconds = random.randint(*self._watch_seconds)
        for event in watch_pods(self._http(), self._node, version, seconds, opened=self._healthy):
            if self._stop.is_set():
                break
            version = event.resource_version or version
            self._apply(event)
        return version

    def _apply(self, event: Event) -> None:
        with self._lock:
            self._version = event.resource_version or self._version
            if event.pod is None:  # a bookmark: only the resourceVersion moved
                return
            key = (event.pod.namespace, event.pod.name)
            if event.kind == "DELETED":
                self._pods.pop(key, None)
            elif key in self._pods or len(self._pods) < MAX_PODS:
                before = self._pods.get(key)
                self._pods[key] = self._revision(event.pod)
                if before is not None and before != self._pods[key]:
                    log.info("pod %s/%s: revision %r -> %r", *key, before, self._pods[key])
            else:
                self._problems.append(Problem("too_many_pods", f"more than {MAX_PODS} pods: {key} left out"))
        self._publish()

    def _revision(self, pod: PodMeta) -> str:
        return revision_of(pod.labels, self._order)

    def _publish(self) -> None:
        with self._lock:
            known = {key: revision for key, revision in self._pods.items() if revision}
        self._revisions.replace(known)

    def _healthy(self) -> None:
        with self._lock:
            if self._failing is not None:
                log.info("pods of node %s: the API server answers again", self._node)
            self._failing, self._known_since = None, self._monotonic()

    def _failed(self, error: WatchError) -> None:
        with self._lock:
            if self._failing is None or self._failing.reason != error.reason:
                log.warning("pods of node %s (%s): %s", self._node, error.reason, error)
            if self._failing is None:
                self._failing_since = self._monotonic()
            self._failing = error
            self._problems.append(Problem(error.reason, str(error)))

    def status(self) -> dict[str, Any]:
        """For tests and reports: the pods known and their revisions."""
        with self._lock:
            return {"pods": dict(self._pods), "resource_version": self._version, "failing": self._failing}


def pod_labels_source(k8s: K8sSettings, node: str, revisions: PodRevisions) -> PodLabelsSource:
    """The source as the exporter's settings configure it (the API server of --kube-api-url, or the pod's
    ServiceAccount); requests other than a watch's wait for 10 s at most."""
    access = k8s.kube_access()
    return PodLabelsSource(
        node,
        k8s.revision_pod_labels,
        revisions,
        lambda: http_client(access, httpx2.Timeout(10.0)),
        interval_seconds=k8s.pod_resources_interval_seconds,
    )
