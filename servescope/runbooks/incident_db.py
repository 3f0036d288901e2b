"""The incident store's SQLite file: its schema, opened in WAL mode, or moved aside when it is unusable.

A file that is not a database (a bad header, garbage) or whose schema cannot be made is renamed to
`<name>.corrupt-<UTC time>` with a loud log line and a new database is created: the runbook pages and
the webhook keep working, and the old incidents stay in the renamed file for whoever wants them.
"""

from __future__ import annotations

import logging
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS incidents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    fingerprint TEXT NOT NULL,
    alertname TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('firing', 'resolved')),
    starts_at TEXT NOT NULL,
    ends_at TEXT,
    labels TEXT NOT NULL,
    annotations TEXT NOT NULL,
    note TEXT,
    received_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    steps_state TEXT,
    interrupted INTEGER NOT NULL DEFAULT 0,
    UNIQUE (fingerprint, starts_at)
);
CREATE INDEX IF NOT EXISTS incidents_alertname ON incidents (alertname, id);
CREATE TABLE IF NOT EXISTS step_results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    incident_id INTEGER NOT NULL REFERENCES incidents (id),
    step_id TEXT NOT NULL,
    title TEXT,
    action TEXT,
    ok INTEGER NOT NULL,
    output TEXT NOT NULL,
    data TEXT NOT NULL,
    finished_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS step_results_incident ON step_results (incident_id, id);
CREATE TABLE IF NOT EXISTS seen (
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL,
    starts_at TEXT NOT NULL,
    seen_at TEXT NOT NULL,
    PRIMARY KEY (fingerprint, status, starts_at)
);
CREATE INDEX IF NOT EXISTS seen_at ON seen (seen_at);
"""
# Columns added since the first release: a database made by it gets them when it is opened.
_ADDED_COLUMNS = {"steps_state": "TEXT", "interrupted": "INTEGER NOT NULL DEFAULT 0"}


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    db.row_factory = sqlite3.Row
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        db.executescript(_SCHEMA)
        have = {row[1] for row in db.execute("PRAGMA table_info(incidents)")}
        for column, kind in _ADDED_COLUMNS.items():
            if column not in have:
                db.execute(f"ALTER TABLE incidents ADD COLUMN {column} {kind}")
        db.execute("CREATE INDEX IF NOT EXISTS incidents_steps ON incidents (steps_state, id)")
    except sqlite3.DatabaseError:
        db.close()
        raise
    return db


def open_db(path: Path) -> sqlite3.Connection:
    """The database at `path`, created when missing, moved aside and created anew when unusable."""
    if not path.exists():
        log.warning("incidents DB %s does not exist: a new one is created", path)
    try:
        return _connect(path)
    except sqlite3.DatabaseError as exc:
        aside = path.with_name(f"{path.name}.corrupt-{datetime.now(UTC):%Y%m%dT%H%M%SZ}")
        path.replace(aside)
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        log.error(
            "INCIDENTS DB %s CANNOT BE USED (%s): moved aside to %s and a new one created; the "
            "incidents it held are in that file",
            path,
            exc,
            aside,
        )
        return _connect(path)
