"""Watches as the API server serves them: every change numbered by its resourceVersion, a window of the
recent ones (a watch from an older resourceVersion gets the real `410 Expired` ERROR event), and objects
sent as PartialObjectMetadata when the client's Accept header asks for it.

A watch from resourceVersion N gets every change after N still in the window, then the changes as they
happen; one without (or from "0") first gets every object as ADDED, as the API server does.
`Store.compact()` empties the window, as etcd's compaction does, so a test can make a client's
resourceVersion too old.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Key = tuple[str, str]  # (group, plural)
METADATA = "as=PartialObjectMetadata"
EXPIRED = "EXPIRED"  # not an event: the window moved past a watch in progress (it ends with a 410)


@dataclass(frozen=True)
class Change:
    version: int
    key: Key
    kind: str  # ADDED, MODIFIED, DELETED
    obj: dict[str, Any]


@dataclass
class Subscription:
    key: Key
    query: str = ""  # the watch request's, for the tests to read
    changes: queue.Queue[Change] = field(default_factory=queue.Queue)


@dataclass
class EventLog:
    keep: int = 1000
    changes: deque[Change] = field(default_factory=deque)
    oldest: int = 0  # a watch from an older resourceVersion than this is too old (410)
    current: int = 0
    subscriptions: list[Subscription] = field(default_factory=list)
    started: list[Subscription] = field(default_factory=list)  # every watch started (tests read them)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, key: Key, kind: str, obj: dict[str, Any]) -> None:
        version = int(obj["metadata"]["resourceVersion"])
        change = Change(version, key, kind, obj)
        with self.lock:
            self.current = max(self.current, version)
            self.changes.append(change)
            while len(self.changes) > self.keep:
                self.oldest = self.changes.popleft().version
            for subscription in self.subscriptions:
                if subscription.key == key:
                    subscription.changes.put(change)

    def compact(self, version: int) -> None:
        """Forget every change so far, as of the new resourceVersion `version`: a watch from any
        resourceVersion handed out before is too old (410); a new list answers `version`."""
        with self.lock:
            self.changes.clear()
            self.oldest = self.current = version
            for subscription in self.subscriptions:  # a watch in progress falls out of the window too
                subscription.changes.put(Change(version, subscription.key, EXPIRED, {}))

    def subscribe(self, key: Key, since: str, query: str = "") -> tuple[list[Change], Subscription] | None:
        """The changes of `key` after resourceVersion `since` (none when "" or "0": the watch starts with
        what exists) and a subscription to the next ones; None when `since` is older than the window."""
        after = int(since) if since not in ("", "0") else None
        with self.lock:
            subscription = Subscription(key, query)
            self.started.append(subscription)
            if after is not None and after < self.oldest:
                return None
            backlog = [c for c in self.changes if c.key == key and after is not None and c.version > after]
            self.subscriptions.append(subscription)
            return backlog, subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self.lock:
            self.subscriptions.remove(subscription)


def wants_metadata(accept: str | None) -> bool:
    """The client asks for PartialObjectMetadata(List) first (a real server honours the first it can)."""
    return METADATA in (accept or "").split(",")[0]


def as_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as PartialObjectMetadata: its metadata, nothing of its spec or status."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def metadata_list(items: list[dict[str, Any]], version: int) -> dict[str, Any]:
    return {
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": str(version)},
        "items": [as_metadata(item) for item in items],
    }


def follow(
    found: tuple[list[Change], Subscription],
    existing: list[dict[str, Any]],
    send: Callable[[str, dict[str, Any]], None],
    seconds: float,
) -> bool:
    """What one watch sends: `existing` as ADDED, the backlog, then the changes for `seconds`; False
    when it fell out of the window (it must end with the 410 ERROR event)."""
    backlog, subscription = found
    for item in existing:
        send("ADDED", item)
    for change in backlog:
        send(change.kind, change.obj)
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            change = subscription.changes.get(timeout=left)
        except queue.Empty:
            break
        if change.kind == EXPIRED:
            return False
        send(change.kind, change.obj)
    return True


def bookmark(key: Key, version: int) -> dict[str, Any]:
    """A BOOKMARK event: only the resourceVersion, which the client may resume from."""
    kind = {("", "pods"): "Pod"}.get(key, "Object")
    return {"type": "BOOKMARK", "object": {"kind": kind, "metadata": {"resourceVersion": str(version)}}}
