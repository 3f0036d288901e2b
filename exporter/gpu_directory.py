"""Which GPU is which: index -> UUID as NVML enumerated it, shared by the sources that need labels."""

from __future__ import annotations

import threading


class GpuDirectory:
    """Written by the NVML source at each (re-)initialisation; read by DCGM and, later, the engine join."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._uuids: dict[str, str] = {}

    def update(self, uuids_by_index: dict[str, str]) -> None:
        with self._lock:
            self._uuids.update(uuids_by_index)

    def uuid(self, index: str) -> str | None:
        with self._lock:
            return self._uuids.get(index)

    def known(self) -> dict[str, str]:
        with self._lock:
            return dict(self._uuids)
