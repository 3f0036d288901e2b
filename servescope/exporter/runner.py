"""Runs one source in its own thread on its own interval, isolated from every other source."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from servescope.exporter.publisher import Publisher
from servescope.exporter.sources.base import Source, SourceError
from servescope.exporter.sources.health import SourceHealth

log = logging.getLogger(__name__)


class SourceRunner:
    """Collects, records health, publishes; a failure of any kind stays inside this runner."""

    def __init__(
        self,
        source: Source,
        publisher: Publisher,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        # A source that only adds labels to others' series says so (`optional`): its failures are
        # reported like any other's, but do not hold the exporter's readiness back.
        self.health = SourceHealth(
            source.name, source.interval_seconds, optional=getattr(source, "optional", False)
        )
        self._publisher = publisher
        self._monotonic = monotonic
        self._wall = wall
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._logged_reason: str | None = None
        publisher.register(self.health)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"source-{self.source.name}", daemon=True)
        self._thread.start()

    def signal_stop(self) -> None:
        """Ask the loop to end after its current cycle, without waiting for it."""
        self._stop.set()

    def stop(self, timeout: float = 5.0) -> None:
        """End the loop, waiting at most `timeout` for a cycle in progress, then close the source (its
        thread is a daemon: a cycle stuck past the wait does not keep the process alive)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        try:
            self.source.close()
        except Exception:  # isolation boundary: a failing close must not block shutdown
            log.exception("source %s: error while closing", self.source.name)

    def run_once(self) -> None:
        """One collection cycle; never raises."""
        name = self.source.name
        started = self._monotonic()
        samples = raw = None
        try:
            collection = self.source.collect()
        except SourceError as exc:
            self._record_failure(exc.reason, exc.message, absent=exc.absent)
        except Exception as exc:  # isolation boundary: a bug in one source never fails the others
            log.exception("source %s: unexpected error", name)
            self._record_failure("unexpected", f"{type(exc).__name__}: {exc}")
        else:
            samples, raw = collection.samples, collection.raw
            self.health.unready, self.health.report = collection.unready, collection.report
            for problem in collection.problems:
                self.health.errors[problem.reason] += 1
                log.debug("source %s: %s: %s", name, problem.reason, problem.message)
            self.health.up = True
            self.health.absent = False
            self.health.last_error = None
            self.health.last_success_wall = self._wall()
            if self._logged_reason is not None:
                log.info("source %s: recovered", name)
                self._logged_reason = None
        self.health.last_duration_seconds = self._monotonic() - started
        if samples is None:
            # No stale values pass for fresh ones: a failed source exports only its health series.
            self._publisher.drop(name)
            return
        try:
            self._publisher.publish(name, samples, raw)
        except Exception as exc:  # isolation boundary, as above
            log.exception("source %s: could not render its samples", name)
            self._record_failure("render", f"{type(exc).__name__}: {exc}")
            self._publisher.drop(name)
        else:
            # Readiness counts a success only once its samples are in the served bytes.
            self.health.last_success_mono = self._monotonic()

    def _record_failure(self, reason: str, message: str, absent: bool = False) -> None:
        self.health.up = False
        self.health.absent = absent
        self.health.errors[reason] += 1
        self.health.last_error = f"{reason}: {message}"
        # Log a reason once when it starts, not once per second while it lasts.
        if reason != self._logged_reason:
            log.warning("source %s down (%s): %s", self.source.name, reason, message)
            self._logged_reason = reason

    def _loop(self) -> None:
        interval = self.source.interval_seconds
        next_due = self._monotonic()
        while not self._stop.is_set():
            self.run_once()
            next_due += interval
            now = self._monotonic()
            next_due = max(next_due, now)  # a slow cycle skips missed ticks instead of bursting
            self._stop.wait(next_due - now)
