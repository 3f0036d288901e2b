"""Per-GPU and per-process histories of 1 s samples, written by the NVML source, read by derived signals.

Every track is a fixed-size ring, and the number of tracks is capped, so the memory this holds is
known up front: 16 bytes x retention seconds per ring (57.6 KB for the default hour).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from servescope.exporter.stores.ring import BYTES_PER_SAMPLE, MemoryRing

# Processes come and go; a process track not written for this long is dropped (its PID is gone).
PROCESS_STALE_SECONDS = 120.0
DEFAULT_MAX_TRACKS = 512


@dataclass
class Track:
    """One GPU's or one process's history; a GPU's `capacity` is the bytes its processes may reach."""

    labels: tuple[str, ...]
    memory: MemoryRing
    capacity: float = 0.0
    total: float = 0.0  # GPUs only: NVML's total, the base of vLLM's gpu_memory_utilization
    utilization: MemoryRing | None = None  # GPUs only: NVML utilisation (0-1), the fallback load
    last_write: float = field(default=float("-inf"))

    @property
    def uuid(self) -> str:
        return self.labels[1]


class MemoryHistory:
    """Thread-safe store of tracks keyed by GPU UUID and by (UUID, PID)."""

    def __init__(self, retention_seconds: float = 3600.0, max_tracks: int = DEFAULT_MAX_TRACKS) -> None:
        if max_tracks < 1:
            raise ValueError(f"max_tracks must be >= 1, got {max_tracks}")
        self.retention_seconds = retention_seconds
        self.max_tracks = max_tracks
        self.lock = threading.Lock()
        self._gpus: dict[str, Track] = {}
        self._processes: dict[tuple[str, int], Track] = {}
        self.refused = 0  # tracks not created because the cap was reached (counted, never silent)

    def _ring(self) -> MemoryRing:
        return MemoryRing(self.retention_seconds, 1.0)

    def _room(self) -> bool:
        if len(self._gpus) + len(self._processes) < self.max_tracks:
            return True
        self.refused += 1
        return False

    def record_gpu(
        self,
        labels: tuple[str, ...],
        t: float,
        *,
        used: float,
        capacity: float,
        total: float,
        utilization: float | None,
    ) -> None:
        """labels: (gpu, uuid, hostname); capacity: used + free, what the GPU's processes can reach."""
        with self.lock:
            track = self._gpus.get(labels[1])
            if track is None:
                if not self._room():
                    return
                track = self._gpus[labels[1]] = Track(labels, self._ring(), utilization=self._ring())
            track.labels, track.capacity, track.total, track.last_write = labels, capacity, total, t
            track.memory.append(t, used)
            if utilization is not None and track.utilization is not None:
                track.utilization.append(t, utilization)

    def record_process(self, labels: tuple[str, ...], t: float, *, used: float) -> None:
        """labels: (gpu, uuid, hostname, pid)."""
        key = (labels[1], int(labels[3]))
        with self.lock:
            track = self._processes.get(key)
            if track is None:
                if not self._room():
                    return
                track = self._processes[key] = Track(labels, self._ring())
            track.labels, track.last_write = labels, t
            track.memory.append(t, used)

    def prune(self, now: float) -> None:
        """Forget processes that exited and GPUs silent for the whole retention."""
        with self.lock:
            for key in [
                k for k, tr in self._processes.items() if now - tr.last_write > PROCESS_STALE_SECONDS
            ]:
                del self._processes[key]
            for uuid in [k for k, tr in self._gpus.items() if now - tr.last_write > self.retention_seconds]:
                del self._gpus[uuid]

    def gpus(self) -> list[Track]:
        with self.lock:
            return sorted(self._gpus.values(), key=lambda tr: _index_order(tr.labels[0]))

    def processes(self) -> list[Track]:
        with self.lock:
            return sorted(self._processes.values(), key=lambda tr: (_index_order(tr.labels[0]), tr.labels[3]))

    def find_gpu(self, gpu: str) -> Track | None:
        """By NVML index ("0") or UUID."""
        with self.lock:
            if gpu in self._gpus:
                return self._gpus[gpu]
            return next((tr for tr in self._gpus.values() if tr.labels[0] == gpu), None)

    def processes_of(self, uuid: str) -> list[Track]:
        with self.lock:
            return [tr for (u, _), tr in sorted(self._processes.items()) if u == uuid]

    def window(self, track: Track, seconds: float, now: float) -> tuple[list[float], list[float]]:
        """A copy of the track's memory samples in the window, taken under the lock."""
        with self.lock:
            return track.memory.window(seconds, now)

    def utilization_window(self, track: Track, seconds: float, now: float) -> tuple[list[float], list[float]]:
        with self.lock:
            return track.utilization.window(seconds, now) if track.utilization else ([], [])

    def span(self, track: Track) -> float:
        """Seconds between the track's oldest and newest sample."""
        with self.lock:
            oldest, newest = track.memory.oldest(), track.memory.latest()
            return newest[0] - oldest[0] if oldest and newest else 0.0

    def nbytes(self) -> int:
        """Bytes held by every ring now (each ring's size is fixed when it is created)."""
        with self.lock:
            tracks = [*self._gpus.values(), *self._processes.values()]
            return sum(
                tr.memory.nbytes() + (tr.utilization.nbytes() if tr.utilization else 0) for tr in tracks
            )

    def max_nbytes(self) -> int:
        """Upper bound: every track a GPU track (two rings) at the cap."""
        return self.max_tracks * 2 * round(self.retention_seconds) * BYTES_PER_SAMPLE


def _index_order(index: str) -> tuple[int, str]:
    return (int(index), "") if index.isdigit() else (1 << 30, index)
