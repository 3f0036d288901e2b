"""Source `dcgm` over a supervised `dcgmi dmon`: latest value per (GPU, field), N/A tracking, fallbacks."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

from servescope.core import catalog as c
from servescope.core.catalog import bounds
from servescope.core.dcgm.counters import CounterField
from servescope.core.dcgm.dmon_format import ErrorKind, ErrorLine, Event, Header, Row, Unparseable
from servescope.exporter.dcgm.discovery import discover_uuids
from servescope.exporter.dcgm.supervisor import Child, DmonSupervisor, spawn_process
from servescope.exporter.exposition import Sample
from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.sources.base import Collection, Problem, SourceError

log = logging.getLogger(__name__)

PROFILING_IDS = range(1001, 1013)
# GPUs taken from dmon's rows while NVML has named none (NVML off, or not enumerated yet): a node has
# at most a few dozen; rows for more entities are a host engine's (or a fake's) garbage.
MAX_GPUS_WITHOUT_NVML = 64
# An entity with no row for this long is forgotten with everything known of it (N/A streaks, support).
FORGET_AFTER_SECONDS = 300.0
# Blank sentinels DCGM uses for "no value"; they must never be exported as numbers.
_INT64_BLANK = float(0x7FFFFFFFFFFFFFF0)
_DOUBLE_BLANK = 140737488355328.0
DISCOVERY_RETRY_SECONDS = 300.0


def is_blank(value: float) -> bool:
    return value >= _DOUBLE_BLANK or value >= _INT64_BLANK


class DmonSource:
    """Runs `dcgmi dmon -e <ids> -d <ms>` forever and exports what it streams."""

    name = "dcgm"

    def __init__(
        self,
        counters: list[CounterField],
        *,
        dcgmi: str = "dcgmi",
        host: str = "",
        hostname: str,
        directory: GpuDirectory,
        interval_seconds: float = 1.0,
        na_rows: int = 5,
        spawn: Callable[[Sequence[str]], Child] = spawn_process,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[threading.Event, float], bool] | None = None,
    ) -> None:
        self.interval_seconds = interval_seconds
        self._fields = {f.field_id: f for f in counters}
        self._dcgmi = dcgmi
        self._host = ["--host", host] if host else []  # a remote host engine; else the local one
        self._hostname = hostname
        self._directory = directory
        self._na_rows = na_rows
        self._clock = clock
        self._lock = threading.Lock()
        self._dropped: dict[int, str] = {}  # field id -> why the host engine will not watch it
        self._active: list[int] = []
        self._latest: dict[str, tuple[float, dict[int, float | None]]] = {}
        # The GPU indexes rows are accepted for: NVML's, refreshed each collection (None: NVML named none).
        self._known: frozenset[str] | None = None
        self._entity_drops: Counter[str] = Counter()
        self._na_streak: Counter[tuple[str, int]] = Counter()
        self._support: dict[tuple[str, int], bool] = {}
        self._problems: list[Problem] = []
        self._restarts: Counter[str] = Counter()
        self._discovered: dict[str, str] = {}
        self._discovery_at = float("-inf")
        self._parse_errors_logged = 0
        self.supervisor = self._supervisor(spawn, wait)
        self._started = False
        self._first_row = threading.Event()

    def _supervisor(
        self, spawn: Callable[[Sequence[str]], Child], wait: Callable[[threading.Event, float], bool] | None
    ) -> DmonSupervisor:
        """The dmon child's supervisor: restarted with this source's argv, its events fed back here."""
        return DmonSupervisor(
            self._argv,
            self._on_event,
            delay_seconds=self.interval_seconds,
            on_restart=self._count_restart,
            on_dropped_line=lambda message: self._problem("line_too_long", message),
            spawn=spawn,
            clock=self._clock,
            wait=wait,
        )

    # --- what to watch ---------------------------------------------------------------------------
    def watch_list(self) -> list[int]:
        """Configured fields, minus those the host engine refused, plus needed fallbacks."""
        with self._lock:
            unsupported_somewhere = {fid for (_, fid), ok in self._support.items() if not ok}
            return [
                f.field_id
                for f in self._fields.values()
                if f.field_id not in self._dropped
                and (
                    f.fallback_for is None
                    or f.fallback_for in unsupported_somewhere
                    or f.fallback_for in self._dropped
                )
            ]

    def _argv(self) -> list[str]:
        self._active = self.watch_list()
        delay_ms = str(max(int(self.interval_seconds * 1000), 100))
        return [self._dcgmi, "dmon", *self._host, "-e", ",".join(map(str, self._active)), "-d", delay_ms]

    def _count_restart(self, reason: str) -> None:
        with self._lock:
            self._restarts[reason] += 1

    # --- events from the child (reader threads) -----------------------------------------------------
    def _on_event(self, event: Event) -> None:
        if isinstance(event, Row):
            self._on_row(event)
        elif isinstance(event, Header):
            if len(event.columns) != len(self._active):
                self._problem(
                    "parse",
                    f"dmon header has {len(event.columns)} columns for {len(self._active)} watched fields",
                )
        elif isinstance(event, ErrorLine):
            self._on_error(event)
        elif isinstance(event, Unparseable):
            self._problem("parse", f"dcgmi line {event.line_no}: {event.reason}: {event.text[:120]!r}")

    def _admit(self, entity_id: str) -> bool:
        """Whether a GPU row is kept: NVML knows the GPU, or (NVML naming none) there is room for it."""
        known = self._known
        if known is not None:
            if entity_id in known:
                return True
            self._entity_drops["unknown_gpu"] += 1
            return False
        if entity_id in self._latest or len(self._latest) < MAX_GPUS_WITHOUT_NVML:
            return True
        self._entity_drops["over_cap"] += 1
        return False

    def _on_row(self, row: Row) -> None:
        if row.entity != "GPU" or row.link is not None or len(row.values) != len(self._active):
            return
        self._first_row.set()
        newly_unsupported = False
        with self._lock:
            if not self._admit(row.entity_id):
                return
            cells = dict(zip(self._active, row.values, strict=True))
            self._latest[row.entity_id] = (self._clock(), cells)
            for fid, value in cells.items():
                key = (row.entity_id, fid)
                if value is not None and not is_blank(value):
                    self._na_streak[key] = 0
                    self._support[key] = True
                    continue
                self._na_streak[key] += 1
                if self._na_streak[key] >= self._na_rows and self._support.get(key) is not False:
                    self._support[key] = False
                    newly_unsupported |= any(f.fallback_for == fid for f in self._fields.values())
                    log.info(
                        "DCGM field %d on GPU %s stayed N/A for %d rows: reported unsupported",
                        fid,
                        row.entity_id,
                        self._na_rows,
                    )
        if newly_unsupported:
            self.supervisor.restart("a field became unsupported: watching its fallback")

    def _on_error(self, error: ErrorLine) -> None:
        self._problem(error.kind.value, error.text)
        if error.kind is ErrorKind.INVALID_FIELD and error.field_id is not None:
            self._drop([error.field_id], "this DCGM does not know the field")
        elif error.kind in (ErrorKind.WATCH_NOT_SUPPORTED, ErrorKind.MODULE_NOT_LOADED, ErrorKind.PERMISSION):
            # Profiling fields are what hosts refuse (module not loaded, consumer GPU, not root):
            # drop them and keep the rest streaming rather than failing everything.
            profiling = [fid for fid in self._active if fid in PROFILING_IDS]
            if profiling:
                self._drop(profiling, error.text)

    def _drop(self, ids: list[int], why: str) -> None:
        with self._lock:
            for fid in ids:
                self._dropped[fid] = why
        log.warning("DCGM: not watching fields %s: %s", ",".join(map(str, ids)), why)
        self.supervisor.restart("watch list changed")

    def _problem(self, reason: str, message: str) -> None:
        with self._lock:
            self._problems.append(Problem(reason, message))
        if reason == "parse" and self._parse_errors_logged < 5:
            self._parse_errors_logged += 1
            log.warning("DCGM: %s", message)

    # --- the source protocol --------------------------------------------------------------------
    def collect(self) -> Collection:
        if not self._started:
            # Give the child its first iteration instead of reporting "starting" as a failure.
            self._started = True
            self.supervisor.start()
            self._first_row.wait(max(self.supervisor.hang_after, 2.0) + 1.0)
            time.sleep(min(0.2, self.interval_seconds / 2))  # the rest of that iteration's rows
        known = frozenset(self._directory.known())
        with self._lock:
            problems, self._problems = self._problems, []
            self._known = known or None
            self._forget_gone()
        status = self.supervisor.status
        if status.down_reason is not None:
            raise SourceError(
                status.down_reason, status.message, absent=status.down_reason == "not_installed"
            )
        fresh = status.last_row is not None and self._clock() - status.last_row <= self.supervisor.hang_after
        if not fresh:
            # Running, but no recent row: a child that starts and fails again must not look up.
            reason, message = status.last_failure or ("no_rows", "dcgmi dmon has printed no row yet")
            raise SourceError(reason, message)
        return Collection(self._samples(), problems)

    def close(self) -> None:
        self.supervisor.stop()

    def _forget_gone(self) -> None:
        """Drop what is known of GPUs NVML no longer lists or that sent no row for a long time (held lock)."""
        now = self._clock()
        gone = {
            gpu
            for gpu, (seen, _) in self._latest.items()
            if (self._known is not None and gpu not in self._known) or now - seen > FORGET_AFTER_SECONDS
        }
        if not gone:
            return
        for gpu in gone:
            del self._latest[gpu]
        for table in (self._na_streak, self._support):
            for key in [key for key in table if key[0] in gone]:
                del table[key]
        log.info("DCGM: forgot GPU(s) %s (gone from NVML, or silent for long)", ", ".join(sorted(gone)))

    def _labels(self, index: str) -> tuple[str, str, str]:
        uuid = self._directory.uuid(index) or self._discovered.get(index)
        if uuid is None and self._clock() - self._discovery_at > DISCOVERY_RETRY_SECONDS:
            self._discovery_at = self._clock()
            self._discovered = self._discover()
            uuid = self._discovered.get(index)
        return (index, uuid or "", self._hostname)

    def _discover(self) -> dict[str, str]:
        return discover_uuids(self._dcgmi, self._host)

    def _samples(self) -> list[Sample]:
        now = self._clock()
        horizon = self.supervisor.hang_after
        with self._lock:
            latest = {gpu: cells for gpu, (seen, cells) in self._latest.items() if now - seen <= horizon}
            support = dict(self._support)
            for gpu in latest:  # fields the host engine refused to watch are unsupported everywhere
                for fid in self._dropped:
                    support[(gpu, fid)] = False
            restarts = dict(self._restarts)
            watched = len(self._active)
        support_by_gpu: dict[str, dict[int, bool]] = {}
        for (gpu, fid), ok in support.items():  # grouped once, not scanned again for every GPU
            support_by_gpu.setdefault(gpu, {})[fid] = ok
        samples: list[Sample] = []
        for index in sorted(latest, key=int):
            labels = self._labels(index)
            for fid, value in latest[index].items():
                field = self._fields[fid]
                if value is None or is_blank(value):
                    continue
                if (
                    field.fallback_for is not None
                    and support.get((index, field.fallback_for)) is not False
                    and field.fallback_for not in self._dropped
                ):
                    continue  # the primary field works on this GPU
                extra = (field.link,) if field.link is not None else ()
                samples.append(Sample(field.spec, (*labels, *extra), value * field.scale))
            for fid, ok in sorted(support_by_gpu.get(index, {}).items()):
                if not ok:  # a supported field shows in its own series: only the missing ones are listed
                    samples.append(Sample(c.DCGM_FIELD_SUPPORTED, (*labels, str(fid)), 0))
        samples += [Sample(c.DCGM_RESTARTS, (reason,), n) for reason, n in sorted(restarts.items())]
        samples += [
            Sample(bounds.DCGM_ENTITIES_DROPPED, (r,), n) for r, n in sorted(self._entity_drops.items())
        ]
        samples.append(Sample(c.DCGM_WATCHED_FIELDS, (), watched))
        return samples
