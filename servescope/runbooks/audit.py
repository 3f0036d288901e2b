"""The audit log of change-step requests made through the runbook server: one JSON line per request.

Every request to run a change step is recorded, whether it was refused, dry-run, executed or failed:
when (ISO-8601 UTC), who (client host and a fingerprint of the bearer token, never the token), what
(alert, step, parameters, execute) and how it ended (`outcome`, `message`). Lines are fsync'ed as they
are written, and a lock keeps the lines of concurrent requests whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

DEFAULT_AUDIT_LOG = "servescope-audit.jsonl"
Outcome = Literal[
    "refused_no_token", "refused_bad_token", "refused_not_configured", "dry_run", "executed", "failed"
]
_MAX_VALUE = 200  # characters of a label value kept in a record (a hostile one may be 10 000)


def fingerprint(token: str | None) -> str | None:
    """The first 8 hex digits of the token's SHA-256: tells tokens apart without revealing them."""
    if not token:
        return None
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _MAX_VALUE:
        return value[:_MAX_VALUE] + f"... ({len(value)} characters)"
    if isinstance(value, dict):
        return {str(_clip(k)): _clip(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clip(v) for v in value]
    return value


class AuditLog:
    """Appends records to a JSON Lines file (created on the first record)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
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
        with self._lock:
            if self.path.parent != Path():
                self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
        return entry

    def records(self) -> list[dict[str, Any]]:
        """Every record in the file (for tests and tools)."""
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
