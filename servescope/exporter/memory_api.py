"""JSON and SVG views of the 1 s memory curves: /api/v1/gpus, /api/v1/gpus/{gpu}/memory[.svg]."""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, Response

from servescope.core.durations import DurationError, human_duration, parse_duration
from servescope.core.errors import ServescopeError
from servescope.exporter.derived.memory_signals import exhaustion
from servescope.exporter.derived.source import DerivedSource
from servescope.exporter.derived.svg import render_memory_svg
from servescope.exporter.stores.history import MemoryHistory, Track

_PLAIN_SECONDS = re.compile(r"^\d+(?:\.\d+)?$")
MEMORY_ROUTE = "/api/v1/gpus/{gpu}/memory"
SVG_ROUTE = "/api/v1/gpus/{gpu}/memory.svg"


class ApiError(ServescopeError):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


def parse_window(text: str, retention: float) -> float:
    """'10m', '90s', '1h' or plain seconds; between 10 s and the retention."""
    plain = text.strip()
    try:
        seconds = float(plain) if _PLAIN_SECONDS.match(plain) else parse_duration(plain)
    except DurationError:
        raise ApiError(
            400, "bad_window", f"window={text[:40]!r}: expected a duration such as 90s, 10m or 1h"
        ) from None
    if not 10 <= seconds <= retention:
        raise ApiError(
            400,
            "bad_window",
            f"window={text[:40]!r}: must be between 10s and the retention ({retention:.0f}s)",
        )
    return seconds


def _finite(value: float) -> float | None:
    """JSON has no infinity: an infinite time to exhaustion is written as null."""
    return value if math.isfinite(value) else None


class MemoryApi:
    """Routes over the runtime's history and derived source; refusals are counted by route and reason."""

    def __init__(self, history: MemoryHistory, derived: DerivedSource, rejections: Counter[tuple[str, str]]):
        self.history, self.derived, self.rejections = history, derived, rejections

    def _track(self, gpu: str) -> Track:
        track = self.history.find_gpu(gpu)
        if track is None:
            known = ", ".join(t.labels[0] for t in self.history.gpus()) or "none yet"
            raise ApiError(404, "unknown_gpu", f"GPU {gpu[:80]!r}: no memory history (known GPUs: {known})")
        return track

    def _refuse(self, route: str, exc: ApiError) -> JSONResponse:
        self.rejections[(route, exc.reason)] += 1
        return JSONResponse({"error": exc.message}, status_code=exc.status)

    def summary(self, track: Track, now: float) -> dict[str, Any]:
        report = self.derived.latest_trend(track, now)
        latest = track.memory.latest()
        used = latest[1] if latest else None
        return {
            "gpu": track.labels[0],
            "uuid": track.labels[1],
            "hostname": track.labels[2],
            "used_bytes": used,
            "capacity_bytes": track.capacity,
            "total_bytes": track.total,
            "history_seconds": self.history.span(track),
            "growth_bytes_per_second": report.slopes,
            "seconds_to_exhaustion": {
                w: _finite(self._exhaustion(used, track.capacity, report.exhaustion_slope(w)))
                for w in report.slopes
            },
            "leak": {"suspected": report.verdict.suspected, "reason": report.verdict.reason},
        }

    @staticmethod
    def _exhaustion(used: float | None, capacity: float, slope: float | None) -> float:
        return math.inf if used is None else exhaustion(used, capacity, slope)

    def memory(self, gpu: str, window: str) -> dict[str, Any]:
        track = self._track(gpu)
        seconds = parse_window(window, self.history.retention_seconds)
        now = time.monotonic()
        to_wall = time.time() - now
        times, values = self.history.window(track, seconds, now)
        processes = []
        for proc in self.history.processes_of(track.uuid):
            p_times, p_values = self.history.window(proc, seconds, now)
            processes.append(
                {
                    "pid": int(proc.labels[3]),
                    "peak_bytes": max(p_values) if p_values else None,
                    "samples": [[round(t + to_wall, 3), v] for t, v in zip(p_times, p_values, strict=True)],
                }
            )
        return {
            **self.summary(track, now),
            "window_seconds": seconds,
            "samples": [[round(t + to_wall, 3), v] for t, v in zip(times, values, strict=True)],
            "processes": processes,
        }

    def svg(self, gpu: str, window: str) -> str:
        track = self._track(gpu)
        seconds = parse_window(window, self.history.retention_seconds)
        now = time.monotonic()
        times, values = self.history.window(track, seconds, now)
        report = self.derived.latest_trend(track, now)
        window_name = "5m" if "5m" in report.slopes else "30m"
        slope = report.slopes.get(window_name)
        title = f"GPU {track.labels[0]} ({track.labels[1]}) on {track.labels[2]}: memory used, last {window}"
        note = ""
        if slope is not None and values:
            left = exhaustion(values[-1], track.capacity, slope)
            full = f", full in {human_duration(left)}" if math.isfinite(left) else ""
            note = f"trend ({window_name}) {slope * 60 / 2**20:+.1f} MiB/min{full}"
        if report.verdict.suspected:
            note += " | LEAK SUSPECTED"
        return render_memory_svg(times, values, track.capacity, slope, title=title, note=note)

    def router(self) -> APIRouter:
        router = APIRouter()

        @router.get("/api/v1/gpus")
        async def gpus() -> dict[str, Any]:
            now = time.monotonic()
            return {"gpus": [self.summary(t, now) for t in self.history.gpus()]}

        @router.get(MEMORY_ROUTE)
        async def memory(gpu: str, window: str = Query("10m", max_length=40)) -> Response:
            try:
                return JSONResponse(self.memory(gpu, window))
            except ApiError as exc:
                return self._refuse(MEMORY_ROUTE, exc)

        @router.get(SVG_ROUTE)
        async def svg(gpu: str, window: str = Query("30m", max_length=40)) -> Response:
            try:
                return Response(self.svg(gpu, window), media_type="image/svg+xml")
            except ApiError as exc:
                return self._refuse(SVG_ROUTE, exc)

        return router
