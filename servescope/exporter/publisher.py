"""Merges what every source last collected into one exposition and keeps it as ready bytes.

Writers (source threads) serialise on a lock and re-render; readers (the HTTP handler) read one
attribute that is swapped atomically, so a scrape never waits for a source nor holds a lock.
"""

from __future__ import annotations

import gzip
import platform
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from servescope import __version__
from servescope.core import catalog as c
from servescope.core.catalog.spec import MetricSpec
from servescope.exporter.exposition import Sample, SeriesRenderer, family_header
from servescope.exporter.sources.health import SourceHealth

ExtraFamilies = Callable[[], str]


@dataclass(frozen=True, slots=True)
class Exposition:
    body: bytes
    gzipped: bytes
    rendered_at: float


class Publisher:
    """The single place that turns source results into the bytes GET /metrics returns."""

    def __init__(
        self,
        *,
        simulated: bool = False,
        extra: Iterable[ExtraFamilies] = (),
        catalog: Iterable[MetricSpec] = c.CATALOG,
        gzip_level: int = 1,
    ) -> None:
        self._lock = threading.Lock()
        self._order = list(catalog)
        self._known = {spec.name for spec in self._order}
        self._health: dict[str, SourceHealth] = {}
        self._families: dict[str, dict[str, list[str]]] = {}
        self._raw: dict[str, str] = {}  # per source: families outside the catalog (engines' own series)
        self._renderers: dict[str, SeriesRenderer] = {}
        self._core_renderer = SeriesRenderer()
        self._extra = list(extra)
        self._simulated = simulated
        self._gzip_level = gzip_level
        self._render_seconds = 0.0
        self._current = Exposition(b"", gzip.compress(b""), 0.0)
        self.render()

    @property
    def current(self) -> Exposition:
        return self._current

    def register(self, health: SourceHealth) -> None:
        with self._lock:
            self._health[health.name] = health
            self._renderers[health.name] = SeriesRenderer()
        self.render()

    def health(self) -> dict[str, SourceHealth]:
        return dict(self._health)

    def publish(self, source: str, samples: Iterable[Sample] | None, raw: str | None = None) -> None:
        """Store a source's latest samples (None keeps the previous ones) and re-render.

        `raw` is exposition text of families that are not servescope's own (passed-through engine
        series); the source is responsible for its validity and for keeping its names disjoint.
        """
        with self._lock:
            if raw is not None:
                self._raw[source] = raw
            if samples is not None:
                families = self._renderers[source].render(samples)
                unknown = families.keys() - self._known
                if unknown:
                    raise ValueError(f"source {source}: metrics missing from the catalog: {sorted(unknown)}")
                self._families[source] = families
            self._render_locked()

    def drop(self, source: str) -> None:
        """Forget a source's samples, e.g. when its data can no longer be trusted."""
        with self._lock:
            self._families.pop(source, None)
            self._raw.pop(source, None)
            self._render_locked()

    def render(self) -> None:
        with self._lock:
            self._render_locked()

    def _core_samples(self) -> list[Sample]:
        samples = [
            Sample(c.BUILD_INFO, (__version__, platform.python_version()), 1),
            Sample(c.SIMULATED, (), 1 if self._simulated else 0),
            Sample(c.RENDER_DURATION, (), self._render_seconds),
        ]
        for name, h in sorted(self._health.items()):
            samples += [
                Sample(c.SOURCE_UP, (name,), 1 if h.up else 0),
                Sample(c.SOURCE_LAST_SUCCESS, (name,), h.last_success_wall),
                Sample(c.SOURCE_DURATION, (name,), h.last_duration_seconds),
                Sample(c.SOURCE_INTERVAL, (name,), h.interval_seconds),
            ]
            if h.is_absent:
                samples.append(Sample(c.SOURCE_ABSENT, (name,), 1))
            samples += [
                Sample(c.SOURCE_ERRORS, (name, reason), count) for reason, count in sorted(h.errors.items())
            ]
        return samples

    def _render_locked(self) -> None:
        started = time.perf_counter()
        per_source = [self._core_renderer.render(self._core_samples()), *self._families.values()]
        parts: list[str] = []
        for spec in self._order:
            lines = [line for families in per_source for line in families.get(spec.name, ())]
            if lines:
                parts.append(family_header(spec))
                parts.extend(lines)
        parts.extend(self._raw.values())
        parts.extend(extra() for extra in self._extra)
        body = "".join(parts).encode()
        self._current = Exposition(body, gzip.compress(body, self._gzip_level), time.time())
        self._render_seconds = time.perf_counter() - started
