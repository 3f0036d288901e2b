"""The last NVLink reading of each GPU, per link: what the GPU API serves when the exposition sums links."""

from __future__ import annotations

import threading
from dataclasses import dataclass

Labels = tuple[str, ...]  # gpu, uuid, hostname


@dataclass(frozen=True)
class LinkState:
    """One link: active or not, and its error counters (the last values read while it was active)."""

    link: int
    up: bool
    errors: dict[str, int]


class NvlinkLinks:
    """Written by the NVML source each cycle, read by the HTTP API; one entry per GPU with NVLink."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gpus: dict[str, tuple[Labels, tuple[LinkState, ...]]] = {}  # uuid -> labels, links

    def update(self, labels: Labels, links: tuple[LinkState, ...]) -> None:
        with self._lock:
            self._gpus[labels[1]] = (labels, links)

    def find(self, gpu: str) -> tuple[Labels, tuple[LinkState, ...]] | None:
        """The GPU by index or UUID, or None."""
        with self._lock:
            entries = list(self._gpus.values())
        return next((entry for entry in entries if gpu in entry[0][:2]), None)

    def known(self) -> list[str]:
        with self._lock:
            return sorted(labels[0] for labels, _ in self._gpus.values())
