"""Watches NVML for critical XID events in its own thread and counts them per (uuid, xid)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from servescope.exporter.nvml.errors import ErrorScope, NvmlError
from servescope.exporter.nvml.library import NvmlLibrary

log = logging.getLogger(__name__)

WAIT_MS = 500


class XidWatcher:
    """Counts XIDs seen after registration; NVML cannot report events from before that."""

    def __init__(self, lib: NvmlLibrary, wall: Callable[[], float] = time.time) -> None:
        self._lib = lib
        self._wall = wall
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, int], tuple[int, float]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._uuids: dict[Any, str] = {}
        self.failed: str | None = None  # why the watcher stopped on its own, if it did

    def start(self, handles: dict[str, Any]) -> list[str]:
        """Register every GPU and start waiting; returns the UUIDs that cannot report XIDs."""
        self.stop()
        self._stop.clear()
        self.failed = None
        event_set = self._lib.event_set_create()
        self._uuids = {self._lib.handle_key(h): uuid for uuid, h in handles.items()}
        unsupported = []
        for uuid, handle in handles.items():
            try:
                self._lib.register_xid_events(handle, event_set)
            except NvmlError as exc:
                if exc.scope is not ErrorScope.FIELD:
                    raise
                unsupported.append(uuid)
        self._thread = threading.Thread(target=self._run, args=(event_set,), name="nvml-xid", daemon=True)
        self._thread.start()
        return unsupported

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * WAIT_MS / 1000 + 1)
            self._thread = None

    def counts(self) -> dict[tuple[str, int], tuple[int, float]]:
        """(uuid, xid) -> (events seen, unix time of the last one)."""
        with self._lock:
            return dict(self._counts)

    def _run(self, event_set: Any) -> None:
        try:
            while not self._stop.is_set():
                event = self._lib.event_wait(event_set, WAIT_MS)
                if event is None:
                    continue
                uuid = self._uuids.get(event.device_key, "unknown")
                with self._lock:
                    count, _ = self._counts.get((uuid, event.xid), (0, 0.0))
                    self._counts[(uuid, event.xid)] = (count + 1, self._wall())
                log.warning("XID %d on GPU %s", event.xid, uuid)
        except NvmlError as exc:
            # The collector sees `failed` and restarts the watcher after it re-initialises NVML.
            self.failed = str(exc)
            log.warning("XID watcher stopped: %s", exc)
        finally:
            with contextlib.suppress(NvmlError):
                self._lib.event_set_free(event_set)
