"""Incidents from Alertmanager notifications, kept in SQLite (WAL): the alerts, their read steps' outputs,
and the (fingerprint, status, startsAt) keys already handled, so a re-send is recognised even after a
restart.

Everything stored from an alert (labels, annotations) is untrusted text: it is stored as data (JSON) and
only ever shown escaped.

The store survives its disk: a database that cannot be opened at start (a bad header, not a database)
is moved aside and a new one created, loudly; a write that fails raises StoreError and leaves `problem`
set (readiness reports it) until a write succeeds again; a database deleted or replaced while running
is noticed by `health()`.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from servescope.core.errors import ServescopeError
from servescope.runbooks import caps
from servescope.runbooks.incident_db import open_db

_INSERTED = (
    "fingerprint, alertname, status, starts_at, ends_at, labels, annotations, note, received_at, updated_at"
)
_COLUMNS = "id, " + _INSERTED + ", steps_state, interrupted"
NEVER = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt while an alert fires
MAX_ID = 2**63 - 1  # SQLite's largest integer: a larger id names no incident


class StoreError(ServescopeError, RuntimeError):
    """A write to the incident store failed; the message names the file and the reason."""

    reason = "store_write"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


class IncidentStore:
    """One SQLite database; one connection shared by all threads behind a lock."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.problem: str | None = None  # why the last write failed, None once one succeeds
        self._db = open_db(self.path)
        self._inode = self._file_id()

    def _file_id(self) -> tuple[int, int] | None:
        try:
            found = self.path.stat()
        except OSError:
            return None
        return found.st_dev, found.st_ino

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock; a failed write sets `problem` and raises StoreError."""
        with self._lock:
            try:
                yield self._db
            except sqlite3.Error as exc:
                self.problem = f"incidents DB {self.path}: cannot write: {exc}"
                if self._db.in_transaction:  # a failed COMMIT leaves it open
                    self._db.rollback()
                raise StoreError(self.problem) from None
            self.problem = None

    def health(self) -> str | None:
        """Why the store cannot keep incidents (deleted or replaced file, failing writes), None when it
        can; while writes fail, each call tries one again (so the store recovers with its disk)."""
        if self._file_id() != self._inode:
            return f"incidents DB {self.path} was deleted or replaced while running: restart the service"
        if self.problem is not None:
            try:
                with self._writing() as db:
                    db.execute("PRAGMA user_version = 1")
            except StoreError:
                pass
        return self.problem

    def journal_mode(self) -> str:
        with self._lock:
            return str(self._db.execute("PRAGMA journal_mode").fetchone()[0])

    # --- dedup --------------------------------------------------------------------------------------
    def seen(self, fingerprint: str, status: str, starts_at: str) -> bool:
        with self._lock:
            row = self._db.execute(
                "SELECT 1 FROM seen WHERE fingerprint = ? AND status = ? AND starts_at = ?",
                (fingerprint, status, starts_at),
            ).fetchone()
        return row is not None

    def remember(self, fingerprint: str, status: str, starts_at: str) -> bool:
        """Mark the key handled; False when it already was."""
        with self._writing() as db:
            cursor = db.execute(
                "INSERT OR IGNORE INTO seen (fingerprint, status, starts_at, seen_at) VALUES (?, ?, ?, ?)",
                (fingerprint, status, starts_at, _now()),
            )
        return cursor.rowcount == 1

    # --- incidents ----------------------------------------------------------------------------------
    def record_firing(self, alert: Mapping[str, Any], note: str | None = None) -> tuple[int, bool]:
        """The incident of a firing alert: (id, created); one per (fingerprint, startsAt)."""
        return self._upsert(alert, "firing", note)

    def mark_resolved(self, alert: Mapping[str, Any], note: str | None = None) -> int:
        """Resolve the alert's incident (one is created if its firing was never received); its id."""
        incident_id, _ = self._upsert(alert, "resolved", note)
        return incident_id

    def _upsert(self, alert: Mapping[str, Any], status: str, note: str | None) -> tuple[int, bool]:
        labels = caps.cap_labels(alert.get("labels") or {})
        fingerprint = str(alert["fingerprint"])
        starts_at = str(alert["startsAt"])
        ends_at = alert.get("endsAt")
        ends_at = None if ends_at in (None, "", NEVER) else str(ends_at)
        now = _now()
        with self._writing(), self._db:
            self._db.execute("BEGIN IMMEDIATE")
            row = self._db.execute(
                "SELECT id, status FROM incidents WHERE fingerprint = ? AND starts_at = ?",
                (fingerprint, starts_at),
            ).fetchone()
            if row is not None:
                if status == "resolved":
                    self._db.execute(
                        "UPDATE incidents SET status = 'resolved', ends_at = ?, updated_at = ? WHERE id = ?",
                        (ends_at, now, row["id"]),
                    )
                return int(row["id"]), False
            cursor = self._db.execute(
                f"INSERT INTO incidents ({_INSERTED}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    fingerprint,
                    str(labels.get("alertname", "")),
                    status,
                    starts_at,
                    ends_at if status == "resolved" else None,
                    _dumps(labels),
                    _dumps(caps.cap_annotations(alert.get("annotations") or {})),
                    note,
                    now,
                    now,
                ),
            )
            assert cursor.lastrowid is not None
            return int(cursor.lastrowid), True

    def set_note(self, incident_id: int, note: str) -> None:
        with self._writing() as db:
            db.execute(
                "UPDATE incidents SET note = ?, updated_at = ? WHERE id = ?", (note, _now(), incident_id)
            )

    def add_step_result(
        self,
        incident_id: int,
        step_id: str,
        ok: bool,
        output: str,
        data: Mapping[str, Any] | None = None,
        *,
        title: str | None = None,
        action: str | None = None,
    ) -> None:
        with self._writing() as db:
            db.execute(
                "INSERT INTO step_results (incident_id, step_id, title, action, ok, output, data,"
                " finished_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    incident_id,
                    step_id,
                    title,
                    action,
                    int(ok),
                    caps.capped_text(output, caps.MAX_OUTPUT),
                    caps.data_json(data or {}),
                    _now(),
                ),
            )

    # --- the read steps' progress, kept so a restart resumes them --------------------------------------
    def set_steps(self, incident_id: int, state: str, note: str | None = None) -> None:
        """Where the incident's read steps are: queued, running, done, or not_resumed."""
        with self._writing() as db:
            db.execute(
                "UPDATE incidents SET steps_state = ?, note = COALESCE(?, note), updated_at = ? WHERE id = ?",
                (state, note, _now(), incident_id),
            )

    def unfinished(self) -> builtins.list[dict[str, Any]]:
        """Incidents whose read steps were queued or running when the service stopped, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, alertname, labels, steps_state FROM incidents"
                " WHERE steps_state IN ('queued', 'running') ORDER BY id"
            ).fetchall()
        return [{**dict(r), "labels": json.loads(r["labels"])} for r in rows]

    def mark_interrupted(self, incident_id: int) -> None:
        with self._writing() as db:
            db.execute("UPDATE incidents SET interrupted = interrupted + 1 WHERE id = ?", (incident_id,))

    def finished_steps(self, incident_id: int) -> set[str]:
        """The ids of the steps whose results are kept."""
        with self._lock:
            rows = self._db.execute("SELECT step_id FROM step_results WHERE incident_id = ?", (incident_id,))
            return {str(r[0]) for r in rows.fetchall()}

    @staticmethod
    def _incident(row: sqlite3.Row) -> dict[str, Any]:
        item = dict(row)
        item["labels"] = json.loads(item["labels"])
        item["annotations"] = json.loads(item["annotations"])
        item["url"] = f"/incidents/{item['id']}"
        return item

    def get(self, incident_id: int) -> dict[str, Any] | None:
        """The incident with its step results (`steps`, in the order they finished), or None."""
        if not 0 <= incident_id <= MAX_ID:
            return None
        with self._lock:
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM incidents WHERE id = ?", (incident_id,)
            ).fetchone()
            if row is None:
                return None
            steps = self._db.execute(
                "SELECT step_id, title, action, ok, output, data, finished_at FROM step_results"
                " WHERE incident_id = ? ORDER BY id",
                (incident_id,),
            ).fetchall()
        item = self._incident(row)
        item["steps"] = [{**dict(s), "ok": bool(s["ok"]), "data": json.loads(s["data"])} for s in steps]
        return item

    def list(
        self, limit: int = 50, status: str | None = None, before: int | None = None
    ) -> builtins.list[dict[str, Any]]:
        """The newest incidents first (without step results), older than id `before` when given."""
        query = f"SELECT {_COLUMNS} FROM incidents WHERE id < ?"
        args: tuple[Any, ...] = (MAX_ID if before is None else before,)
        if status is not None:
            query += " AND status = ?"
            args = (*args, status)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
        return [self._incident(r) for r in rows]

    def connection(self) -> Any:
        """The connection and the lock around it, for the retention policy (`retention.py`)."""
        return self._writing()

    def latest(self, alert: str, limit: int = 5) -> builtins.list[dict[str, Any]]:
        """The newest incidents of one alert: id, status, starts_at, labels and url."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, status, starts_at, labels FROM incidents WHERE alertname = ?"
                " ORDER BY id DESC LIMIT ?",
                (alert, limit),
            ).fetchall()
        return [
            {
                "id": r["id"],
                "status": r["status"],
                "starts_at": r["starts_at"],
                "labels": json.loads(r["labels"]),
                "url": f"/incidents/{r['id']}",
            }
            for r in rows
        ]
