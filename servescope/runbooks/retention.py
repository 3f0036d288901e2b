"""The incident store's retention: incidents and their step outputs past an age or a size are deleted.

Oldest first, never an incident whose read steps are still queued or running. Age: an incident received
more than `max_age_days` ago goes, with its step results and the dedup keys of that time. Size: while
the pages in use hold more than `max_bytes`, the oldest incidents go, a batch at a time (SQLite reuses
the freed pages, so the file stops growing there). The service prunes at start and every
PRUNE_INTERVAL seconds.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from servescope.runbooks.incidents import IncidentStore

PRUNE_INTERVAL = 600.0
BATCH = 200
_IDLE = "COALESCE(steps_state, 'done') NOT IN ('queued', 'running')"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Retention:
    max_age_days: float = 30.0
    max_bytes: int = 512 * 2**20


def _used_bytes(db: Any) -> int:
    pages = int(db.execute("PRAGMA page_count").fetchone()[0])
    free = int(db.execute("PRAGMA freelist_count").fetchone()[0])
    return (pages - free) * int(db.execute("PRAGMA page_size").fetchone()[0])


def _delete(db: Any, where: str, args: tuple[Any, ...]) -> int:
    ids = [row[0] for row in db.execute(f"SELECT id FROM incidents WHERE {where}", args).fetchall()]
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        db.execute(f"DELETE FROM step_results WHERE incident_id IN ({marks})", chunk)
        db.execute(f"DELETE FROM incidents WHERE id IN ({marks})", chunk)
    return len(ids)


def prune(store: IncidentStore, retention: Retention, now: datetime | None = None) -> dict[str, int]:
    """Delete what the retention says; how many incidents went by age and by size."""
    cutoff = ((now or datetime.now(UTC)) - timedelta(days=retention.max_age_days)).isoformat(
        timespec="milliseconds"
    )
    with store.connection() as db:
        by_age = _delete(db, f"received_at < ? AND {_IDLE}", (cutoff,))
        db.execute("DELETE FROM seen WHERE seen_at < ?", (cutoff,))
        by_size = 0
        while _used_bytes(db) > retention.max_bytes:
            deleted = _delete(
                db, f"id IN (SELECT id FROM incidents WHERE {_IDLE} ORDER BY id LIMIT ?)", (BATCH,)
            )
            if not deleted:
                break
            by_size += deleted
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    if by_age or by_size:
        log.info("retention: %d incident(s) older than %g days and %d over the size cap deleted", by_age,
                 retention.max_age_days, by_size)  # fmt: skip
    return {"by_age": by_age, "by_size": by_size}


def prune_periodically(store: IncidentStore, retention: Retention, stop: threading.Event) -> threading.Thread:
    """A thread pruning now and every PRUNE_INTERVAL seconds until `stop` is set."""

    def loop() -> None:
        while True:
            try:
                prune(store, retention)
            except Exception as exc:  # a failing disk: readiness reports it; pruning tries again later
                log.error("retention: %s", exc)
            if stop.wait(PRUNE_INTERVAL):
                return

    thread = threading.Thread(target=loop, name="incident-retention", daemon=True)
    thread.start()
    return thread
