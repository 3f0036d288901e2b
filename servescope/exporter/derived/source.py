"""Source `derived`: signals computed from the sample histories the NVML and vLLM sources keep."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from servescope.core.catalog import derived as m
from servescope.exporter.derived.engine_signals import (
    AdvisorConfig,
    advise,
    kv_headroom,
    kv_saturation_seconds,
    over_budget,
)
from servescope.exporter.derived.leak import Series, half_change_relative
from servescope.exporter.derived.memory_signals import (
    LEAK_WINDOW_SECONDS,
    TrendReport,
    exhaustion,
    trend_report,
)
from servescope.exporter.derived.trend import robust_slope
from servescope.exporter.exposition import Sample
from servescope.exporter.sources.base import Collection
from servescope.exporter.stores.history import MemoryHistory, Track
from servescope.exporter.stores.serving_board import EngineTrack, ServingBoard

# Theil-Sen over 30 min of samples costs milliseconds per track: trends are refreshed every 30 s,
# peaks and exhaustion times (cheap) every cycle.
TREND_SECONDS = 30.0
KV_TREND_SECONDS = 300.0


class DerivedSource:
    name = "derived"

    def __init__(
        self,
        history: MemoryHistory,
        board: ServingBoard,
        *,
        interval_seconds: float = 5.0,
        peak_window_seconds: float = 60.0,
        advisor: AdvisorConfig | None = None,
        api_rejections: Counter[tuple[str, str]] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval_seconds = interval_seconds
        self.history = history
        self.board = board
        self.peak_window_seconds = peak_window_seconds
        self.advisor = advisor or AdvisorConfig()
        self.api_rejections = api_rejections if api_rejections is not None else Counter()
        self._monotonic = monotonic
        self._trends: dict[tuple[str, ...], TrendReport] = {}
        self._kv_slopes: dict[tuple[str, ...], tuple[float, float | None]] = {}

    def close(self) -> None:
        pass

    # --- shared with the API -----------------------------------------------------------------------
    def trend(self, track: Track, now: float, key: tuple[str, ...] | None = None) -> TrendReport:
        """The track's trends, recomputed when older than TREND_SECONDS."""
        key = key or track.labels
        report = self._trends.get(key)
        if report is None or now - report.computed_at >= TREND_SECONDS:
            times, values = self.history.window(track, LEAK_WINDOW_SECONDS, now)
            load, kv = self._load_of(track.uuid, now)
            report = self._trends[key] = trend_report(times, values, now, load, kv)
        return report

    def latest_trend(self, track: Track, now: float) -> TrendReport:
        """For the HTTP API: the report this source keeps fresh every TREND_SECONDS, computed only when
        none exists yet, so a request never refits Theil-Sen on the event loop."""
        report = self._trends.get(track.labels)
        return report if report is not None else self.trend(track, now)

    def _load_of(self, uuid: str, now: float) -> tuple[Series | None, Series | None]:
        """The serving load on a GPU: its engines' tokens/s and KV usage, else NVML utilisation."""
        gpu = self.history.find_gpu(uuid)
        utilization = [] if gpu is None else [self.history.utilization_window(gpu, LEAK_WINDOW_SECONDS, now)]
        engines = self.board.engines_on(uuid)
        if engines:
            # Several engines on one GPU: the one whose load moved most decides (growth follows it).
            # NVML utilisation is a candidate too: read every second, it shows a slow ramp that an
            # engine's tokens/s, sampled at each scrape of Poisson arrivals, cannot yet tell from noise.
            loads = [self.board.series(e.tokens_rate, LEAK_WINDOW_SECONDS, now) for e in engines]
            kvs = [self.board.series(e.kv_usage, LEAK_WINDOW_SECONDS, now) for e in engines]
            return _most_moving(loads + utilization), _most_moving(kvs)
        return (utilization[0] if utilization else None), None

    # --- one cycle ---------------------------------------------------------------------------------
    def collect(self) -> Collection:
        now = self._monotonic()
        self.history.prune(now)
        self.board.prune(now)
        samples: list[Sample] = []
        live: set[tuple[str, ...]] = set()
        for track in self.history.gpus():
            live.add(track.labels)
            samples += self._memory_samples(track, now, gpu=True)
        for track in self.history.processes():
            live.add(track.labels)
            samples += self._memory_samples(track, now, gpu=False)
        for engine in self.board.engines():
            live.add(engine.labels)
            samples += self._engine_samples(engine, now)
        # Forget cached trends of tracks that are gone, so the cache stays as bounded as the history.
        self._trends = {k: v for k, v in self._trends.items() if k in live}
        self._kv_slopes = {k: v for k, v in self._kv_slopes.items() if k in live}
        samples.append(Sample(m.HISTORY_BYTES, (), self.history.nbytes() + self.board.nbytes()))
        samples += [
            Sample(m.API_REJECTED, (route, reason), n)
            for (route, reason), n in sorted(self.api_rejections.items())
        ]
        return Collection(samples)

    def _memory_samples(self, track: Track, now: float, *, gpu: bool) -> list[Sample]:
        labels = track.labels
        _, values = self.history.window(track, self.peak_window_seconds, now)
        if not values:
            return []
        report = self.trend(track, now)
        peak_spec = m.MEMORY_PEAK if gpu else m.PROCESS_MEMORY_PEAK
        out = [Sample(peak_spec, labels, max(values))]
        if gpu:
            out.append(Sample(m.MEMORY_MIN, labels, min(values)))
        growth = m.MEMORY_GROWTH if gpu else m.PROCESS_MEMORY_GROWTH
        for window, slope in report.slopes.items():
            out.append(Sample(growth, (*labels, window), slope))
            if gpu:
                left = exhaustion(values[-1], track.capacity, report.exhaustion_slope(window))
                out.append(Sample(m.MEMORY_EXHAUSTION, (*labels, window), left))
        leak = m.LEAK_SUSPECTED if gpu else m.PROCESS_LEAK_SUSPECTED
        out.append(Sample(leak, labels, 1 if report.verdict.suspected else 0))
        return out

    def _kv_slope(self, engine: EngineTrack, now: float) -> float | None:
        cached = self._kv_slopes.get(engine.labels)
        if cached is None or now - cached[0] >= TREND_SECONDS:
            times, values = self.board.series(engine.kv_usage, KV_TREND_SECONDS, now)
            slope = robust_slope(times, values) if len(times) >= 8 else None
            cached = self._kv_slopes[engine.labels] = (now, slope)
        return cached[1]

    def _engine_samples(self, engine: EngineTrack, now: float) -> list[Sample]:
        labels = engine.labels
        out: list[Sample] = []
        latest = engine.kv_usage.latest()
        if latest is not None:
            usage = latest[1]
            headroom = kv_headroom(engine, usage)
            if headroom is not None:
                out.append(Sample(m.KV_FREE_TOKENS, labels, headroom.free_tokens))
                if headroom.free_requests is not None:
                    out.append(Sample(m.KV_FREE_REQUESTS, labels, headroom.free_requests))
            out.append(
                Sample(m.KV_SATURATION, labels, kv_saturation_seconds(usage, self._kv_slope(engine, now)))
            )
        for (gpu, uuid), excess in sorted(over_budget(engine, self.history).items()):
            out.append(Sample(m.MEMORY_OVER_BUDGET, (*labels, gpu, uuid), excess))
        advice = advise(engine, self.board, self.history, self.advisor, now)
        out.append(Sample(m.RECOMMENDED_MAX_NUM_SEQS, (*labels, advice.reason), advice.value))
        return out


def _most_moving(series: list[tuple[list[float], list[float]]]) -> Series | None:
    """The series whose halves differ most (relative to its mean): one noisy sample cannot decide."""
    usable = [s for s in series if len(s[0]) >= 4]
    if not usable:
        return None
    return max(usable, key=lambda s: abs(half_change_relative(s) or 0.0))
