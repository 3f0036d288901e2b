"""What the derived signals need from each serving engine, kept over time: load, KV usage, latency.

The vLLM source records every successful scrape here; the derived source reads it. Each engine's
series are fixed-size rings, and engines not scraped for ENGINE_STALE_SECONDS are forgotten.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

from servescope.exporter.stores.ring import MemoryRing
from servescope.exporter.stores.signals import EngineSignals, GpuProcess, Normalised

ENGINE_STALE_SECONDS = 600.0
LATENCY_HISTOGRAMS = ("ttft", "itl", "e2e")


@dataclass
class EngineTrack:
    model_name: str
    engine: str
    endpoint: str
    tokens_rate: MemoryRing  # prompt + generated tokens per second between consecutive scrapes
    kv_usage: MemoryRing
    running: MemoryRing
    latency: deque[tuple[float, dict[str, float]]]  # cumulative bucket snapshots (le -> count)
    gpus: list[GpuProcess] = field(default_factory=list)
    capacity_tokens: float | None = None
    max_model_len: float | None = None
    gpu_memory_utilization: float | None = None
    last_tokens: tuple[float, float] | None = None
    last_write: float = float("-inf")

    @property
    def labels(self) -> tuple[str, str, str]:
        return (self.model_name, self.engine, self.endpoint)


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "", "None") else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None


def max_model_len(engine: EngineSignals) -> float | None:
    """vLLM 0.11+ states kv_cache_max_concurrency = KV tokens / max_model_len: invert it."""
    tokens = _number(engine.cache.get("kv_cache_size_tokens"))
    concurrency = _number(engine.cache.get("kv_cache_max_concurrency"))
    return round(tokens / concurrency) if tokens and concurrency else None


class ServingBoard:
    """Thread-safe per-engine histories keyed by (model_name, engine, endpoint)."""

    def __init__(
        self,
        retention_seconds: float = 3600.0,
        resolution_seconds: float = 5.0,
        latency: str = "ttft",
        latency_window_seconds: float = 60.0,
    ) -> None:
        if latency not in LATENCY_HISTOGRAMS:
            raise ValueError(
                f"latency histogram {latency!r}: expected one of {', '.join(LATENCY_HISTOGRAMS)}"
            )
        self.retention_seconds = retention_seconds
        self.resolution_seconds = resolution_seconds
        self.latency = latency
        self.latency_window_seconds = latency_window_seconds
        self.lock = threading.Lock()
        self._engines: dict[tuple[str, str, str], EngineTrack] = {}

    def _track(self, key: tuple[str, str, str]) -> EngineTrack:
        track = self._engines.get(key)
        if track is None:
            model_name, engine, endpoint = key
            track = self._engines[key] = EngineTrack(
                model_name,
                engine,
                endpoint,
                tokens_rate=self._ring(),
                kv_usage=self._ring(),
                running=self._ring(),
                latency=deque(),
            )
        return track

    def _ring(self) -> MemoryRing:
        return MemoryRing(self.retention_seconds, self.resolution_seconds)

    def record(self, endpoint: str, normalised: Normalised, gpus: list[GpuProcess], t: float) -> None:
        """One successful scrape of `endpoint` at monotonic time t."""
        with self.lock:
            for engine in normalised.engines.values():
                track = self._track((engine.model_name, engine.engine, endpoint))
                self._update(track, engine, gpus, t)

    def _update(self, track: EngineTrack, engine: EngineSignals, gpus: list[GpuProcess], t: float) -> None:
        values = engine.values
        track.gpus, track.last_write = list(gpus), t
        track.capacity_tokens = values.get("kv_capacity_tokens")
        track.gpu_memory_utilization = values.get("gpu_memory_utilization")
        track.max_model_len = max_model_len(engine)
        if "kv_usage" in values:
            track.kv_usage.append(t, values["kv_usage"])
        if "running" in values:
            track.running.append(t, values["running"])
        tokens = values.get("prompt_tokens", 0.0) + values.get("generation_tokens", 0.0)
        if track.last_tokens is not None:
            then, before = track.last_tokens
            # A counter that went down means the engine restarted: that interval has no rate.
            if t > then and tokens >= before:
                track.tokens_rate.append(t, (tokens - before) / (t - then))
        track.last_tokens = (t, tokens)
        histogram = engine.histograms.get(self.latency)
        if histogram is not None:
            buckets = dict(histogram.buckets)
            buckets.setdefault("+Inf", histogram.count)
            track.latency.append((t, buckets))
            # Keep one snapshot at or before the window's start, and nothing older.
            while len(track.latency) > 2 and track.latency[1][0] <= t - self.latency_window_seconds:
                track.latency.popleft()

    def prune(self, now: float) -> None:
        with self.lock:
            for key in [k for k, tr in self._engines.items() if now - tr.last_write > ENGINE_STALE_SECONDS]:
                del self._engines[key]

    def engines(self) -> list[EngineTrack]:
        with self.lock:
            return [self._engines[k] for k in sorted(self._engines)]

    def engines_on(self, uuid: str) -> list[EngineTrack]:
        with self.lock:
            return [tr for _, tr in sorted(self._engines.items()) if any(g.uuid == uuid for g in tr.gpus)]

    def series(self, ring: MemoryRing, seconds: float, now: float) -> tuple[list[float], list[float]]:
        with self.lock:
            return ring.window(seconds, now)

    def latency_window(self, track: EngineTrack) -> tuple[dict[str, float], dict[str, float]] | None:
        """(start, end) bucket snapshots spanning about the latency window, or None with fewer than 2."""
        with self.lock:
            if len(track.latency) < 2:
                return None
            return track.latency[0][1], track.latency[-1][1]

    def nbytes(self) -> int:
        with self.lock:
            return sum(
                tr.tokens_rate.nbytes() + tr.kv_usage.nbytes() + tr.running.nbytes()
                for tr in self._engines.values()
            )
