"""Bounded ring buffer of GPU memory samples at about one-second resolution."""

from __future__ import annotations

from array import array

# Two float64 columns (timestamp, used bytes): the memory bound is fixed at construction.
BYTES_PER_SAMPLE = 2 * array("d").itemsize


class MemoryRing:
    """Fixed-capacity (timestamp, used_bytes) history; the oldest samples are overwritten."""

    def __init__(self, capacity_seconds: float = 3600.0, resolution: float = 1.0) -> None:
        if capacity_seconds <= 0 or resolution <= 0:
            raise ValueError(
                f"capacity_seconds and resolution must be > 0, got {capacity_seconds}, {resolution}"
            )
        self.resolution = resolution
        self.capacity = max(1, round(capacity_seconds / resolution))
        self._times = array("d", bytes(self.capacity * array("d").itemsize))
        self._values = array("d", bytes(self.capacity * array("d").itemsize))
        self._start = 0
        self._count = 0

    def nbytes(self) -> int:
        """Bytes held by the sample storage: BYTES_PER_SAMPLE x capacity, constant."""
        return self.capacity * BYTES_PER_SAMPLE

    def __len__(self) -> int:
        return self._count

    def _slot(self, logical: int) -> int:
        return (self._start + logical) % self.capacity

    def append(self, t: float, value: float) -> bool:
        """Add a sample; returns False when it was dropped as out of order."""
        if self._count:
            last = self._slot(self._count - 1)
            gap = t - self._times[last]
            if gap <= 0:
                return False
            # A sampler faster than the resolution would shorten the covered time; merge instead,
            # keeping the larger value so a short spike before an OOM is never lost.
            if gap < self.resolution / 2:
                self._values[last] = max(self._values[last], value)
                return True
        if self._count < self.capacity:
            slot = self._slot(self._count)
            self._count += 1
        else:
            slot = self._start
            self._start = (self._start + 1) % self.capacity
        self._times[slot] = t
        self._values[slot] = value
        return True

    def _first_at_or_after(self, t: float) -> int:
        """Logical index of the first sample with timestamp >= t (binary search over the ring)."""
        lo, hi = 0, self._count
        while lo < hi:
            mid = (lo + hi) // 2
            if self._times[self._slot(mid)] < t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _first_after(self, t: float) -> int:
        """Logical index of the first sample with timestamp > t."""
        lo, hi = 0, self._count
        while lo < hi:
            mid = (lo + hi) // 2
            if self._times[self._slot(mid)] <= t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _columns(self, begin: int, end: int) -> tuple[list[float], list[float]]:
        """Logical samples [begin, end) as lists, by at most two array slices (the ring may wrap)."""
        if begin >= end:
            return [], []
        first, last = self._slot(begin), self._slot(end - 1)
        if first <= last:
            return self._times[first : last + 1].tolist(), self._values[first : last + 1].tolist()
        return (
            self._times[first:].tolist() + self._times[: last + 1].tolist(),
            self._values[first:].tolist() + self._values[: last + 1].tolist(),
        )

    def window(self, seconds: float, now: float) -> tuple[list[float], list[float]]:
        """Samples with now - seconds <= t <= now, oldest first."""
        return self._columns(self._first_at_or_after(now - seconds), self._first_after(now))

    def peak(self, seconds: float, now: float) -> float | None:
        """Largest value in the window, or None when it is empty."""
        _, values = self.window(seconds, now)
        return max(values) if values else None

    def minimum(self, seconds: float, now: float) -> float | None:
        """Smallest value in the window, or None when it is empty."""
        _, values = self.window(seconds, now)
        return min(values) if values else None

    def oldest(self) -> tuple[float, float] | None:
        """Oldest (timestamp, value) still held, or None when empty."""
        if not self._count:
            return None
        return self._times[self._start], self._values[self._start]

    def latest(self) -> tuple[float, float] | None:
        """Newest (timestamp, value), or None when empty."""
        if not self._count:
            return None
        slot = self._slot(self._count - 1)
        return self._times[slot], self._values[slot]
