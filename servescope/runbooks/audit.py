"""The audit log of change-step requests made through the runbook server: one JSON line per request.

Every request to run a change step is recorded, whether it was refused, dry-run, executed or failed:
when (ISO-8601 UTC), who (client host and a fingerprint of the bearer token, never the token), what
(alert, step, parameters, execute) and how it ended (`outcome`, `message`). Lines are fsync'ed as they
are written, and a lock keeps the lines of concurrent requests whole. A record is bounded (values
clipped, at most `_MAX_ITEMS` labels, at most `MAX_RECORD_BYTES` a line), the file too: past
`max_file_bytes` it is renamed `<name>.1` (replacing the one before) and a new one begun, so a flood of
refused requests takes at most twice that on disk. A record that cannot be written raises AuditError:
the caller must not act on a request it could not record.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

DEFAULT_AUDIT_LOG = "servescope-audit.jsonl"
log = logging.getLogger(__name__)
Outcome = Literal[
    "refused_no_token",
    "refused_bad_token",
    "refused_not_configured",
    "refused_target",
    "refused_busy",
    "malformed",
    "unknown_step",
    "accepted",
    "dry_run",
    "executed",
    "failed",
]
_MAX_VALUE = 200  # characters of a label value kept in a record (a hostile one may be 10 000)
_MAX_ITEMS = 64  # labels or parameters kept in a record (a hostile request may send 50 000)
MAX_RECORD_BYTES = 16_384
MAX_FILE_BYTES = 16 * 2**20  # twice this fits the exporter pod's 64 Mi emptyDir with room to spare


class AuditError(OSError):
    """The audit record could not be written; the message names the file and the reason."""


def fingerprint(token: str | None) -> str | None:
    """The first 8 hex digits of the token's SHA-256: tells tokens apart without revealing them."""
    if not token:
        return None
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _MAX_VALUE:
        return value[:_MAX_VALUE] + f"... ({len(value)} characters)"
    if isinstance(value, dict):
        kept = {str(_clip(k)): _clip(v) for k, v in list(value.items())[:_MAX_ITEMS]}
        if len(value) > _MAX_ITEMS:
            kept["..."] = f"{len(value) - _MAX_ITEMS} more not recorded"
        return kept
    if isinstance(value, list):
        return [_clip(v) for v in value[:_MAX_ITEMS]]
    return value


class AuditLog:
    """Appends records to a JSON Lines file (created on the first record)."""

    def __init__(self, path: Path | str, max_file_bytes: int = MAX_FILE_BYTES) -> None:
        self.path = Path(path)
        self.max_file_bytes = max_file_bytes
        self._lock = threading.Lock()

    def record(
        self,
        *,
        host: str | None,
        token: str | None,
        alert: str,
        step: str,
        parameters: dict[str, Any] | None,
        labels: dict[str, str] | None,
        execute: bool,
        outcome: Outcome,
        message: str,
    ) -> dict[str, Any]:
        """Append one record and flush it to disk; the record as written."""
        entry: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "caller": {"host": host or "unknown", "token": fingerprint(token)},
            "alert": alert,
            "step": step,
            "parameters": _clip(parameters),
            "labels": _clip(labels),
            "execute": execute,
            "outcome": outcome,
            "message": _clip(message),
        }
        line = json.dumps(entry, ensure_ascii=True, sort_keys=False) + "\n"
        if len(line) > MAX_RECORD_BYTES:
            entry.update(labels="(not recorded: too large)", parameters="(not recorded: too large)")
            entry["message"] = str(entry["message"])[:_MAX_VALUE]
            line = json.dumps(entry, ensure_ascii=True, sort_keys=False) + "\n"
        self._append(line)
        return entry

    def _append(self, line: str) -> None:
        try:
            with self._lock:
                if self.path.parent != Path():
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                self._rotate_if_full()
                with self.path.open("a", encoding="utf-8") as handle:
                    handle.write(line)
                    handle.flush()
                    os.fsync(handle.fileno())
        except OSError as exc:
            raise AuditError(f"audit log {self.path}: cannot write: {exc.strerror or exc}") from None

    def _rotate_if_full(self) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size >= self.max_file_bytes:
            self.path.replace(self.path.with_name(self.path.name + ".1"))
            log.warning("audit log %s reached %d bytes: kept as %s.1", self.path, size, self.path.name)

    def records(self) -> list[dict[str, Any]]:
        """Every record in the file (for tests and tools)."""
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
