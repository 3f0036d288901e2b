"""The audit trail: one JSON line per authenticated change-step request and per CLI `--execute`.

Only a caller who presented a valid change token (or a person at the CLI acting with --execute) makes
records: a refused request (no token, a wrong one) is counted and logged (`refusals.py`), never written
here, so no caller without a token can fill the trail or push a record out of it. Records are appended,
never rotated or rewritten; each is fsync'ed before the change it records runs, and written to stdout
too, where the cluster's log collector keeps a second copy.

Each record carries `seq` (1, 2, ...) and `prev`, the SHA-256 of the previous line (64 zeros for the
first): deleting, reordering or editing a line breaks the chain at that point, which `servescope runbook
audit verify` reports (a trail cut short at its end is found by comparing its last hash with the
log collector's copy: `--head`). Processes share a trail safely: the service and a CLI --execute in the
same pod lock the file while they append.

A record names who (the token's name from the token file, the client's address), what (alert, step,
parameters, labels, execute) and how it ended (`outcome`, `message`); it is bounded (values clipped, at
most 64 labels, 16 KiB a line). A record that cannot be written raises AuditError: the caller must not
act on a request it could not record.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal

from servescope.core.errors import ServescopeError

DEFAULT_AUDIT_LOG = "servescope-audit.jsonl"
GENESIS = "0" * 64
Outcome = Literal[
    "accepted", "dry_run", "executed", "failed", "malformed", "unknown_step", "refused_busy", "refused_cli"
]
_MAX_VALUE = 200  # characters of a label value kept in a record (a hostile one may be 10 000)
_MAX_ITEMS = 64  # labels or parameters kept in a record
MAX_RECORD_BYTES = 16_384
_TAIL_BYTES = 2 * MAX_RECORD_BYTES  # the last record is within this much of the end


class AuditError(ServescopeError, OSError):
    """The audit record could not be written; the message names the file and the reason."""

    reason = "audit_write"


def fingerprint(token: str | None) -> str | None:
    """The first 8 hex digits of the token's SHA-256: tells tokens apart without revealing them."""
    if not token:
        return None
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def line_hash(line: str) -> str:
    return hashlib.sha256(line.rstrip("\n").encode("utf-8")).hexdigest()


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


def last_record(handle: IO[bytes]) -> tuple[int, str]:
    """(seq, hash) of the last line of an open trail; (0, GENESIS) when it is empty."""
    size = handle.seek(0, os.SEEK_END)
    if size == 0:
        return 0, GENESIS
    handle.seek(max(0, size - _TAIL_BYTES))
    tail = handle.read().decode("utf-8", "replace").rstrip("\n")
    line = tail.rsplit("\n", 1)[-1]
    try:
        seq = int(json.loads(line)["seq"])
    except (ValueError, KeyError, TypeError):
        raise AuditError(f"its last line is not an audit record: {line[:80]!r}") from None
    return seq, line_hash(line)


class AuditLog:
    """Appends chained records to a JSON Lines file (created on the first record), echoing each line."""

    def __init__(self, path: Path | str, *, echo: IO[str] | None = None) -> None:
        self.path = Path(path)
        self._echo = echo if echo is not None else sys.stdout
        self._lock = threading.Lock()

    def record(
        self,
        *,
        host: str | None,
        identity: str | None,
        token: str | None,
        alert: str,
        step: str,
        parameters: dict[str, Any] | None,
        labels: dict[str, str] | None,
        execute: bool,
        outcome: Outcome,
        message: str,
    ) -> dict[str, Any]:
        """Append one record, flushed to disk; the record as written."""
        entry: dict[str, Any] = {
            "seq": 0,
            "prev": GENESIS,
            "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "caller": {"identity": identity, "host": host or "unknown", "token": fingerprint(token)},
            "alert": _clip(alert),
            "step": _clip(step),
            "parameters": _clip(parameters),
            "labels": _clip(labels),
            "execute": execute,
            "outcome": outcome,
            "message": _clip(message),
        }
        self._bound(entry)
        try:
            with self._lock:
                line = self._append(entry)
        except OSError as exc:
            raise AuditError(f"audit log {self.path}: cannot write: {exc.strerror or exc}") from None
        try:
            self._echo.write(line)
            self._echo.flush()
        except (OSError, ValueError):
            pass  # stdout gone: the file holds the record
        return entry

    @staticmethod
    def _bound(entry: dict[str, Any]) -> None:
        if len(json.dumps(entry, ensure_ascii=True)) > MAX_RECORD_BYTES - 200:
            entry.update(labels="(not recorded: too large)", parameters="(not recorded: too large)")

    def _append(self, entry: dict[str, Any]) -> str:
        if self.path.parent != Path():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o640)
        with os.fdopen(descriptor, "r+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # a CLI --execute may append beside the service
            seq, previous = last_record(handle)
            entry["seq"], entry["prev"] = seq + 1, previous
            line = json.dumps(entry, ensure_ascii=True) + "\n"
            handle.write(line.encode("ascii"))
            handle.flush()
            os.fsync(handle.fileno())
        return line

    def records(self) -> list[dict[str, Any]]:
        """Every record in the file (for tests and tools)."""
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]


def verify(lines: list[str], head: str | None = None) -> tuple[list[str], int, str]:
    """The problems of a trail (empty when whole), its records and its last hash. Lines that are not
    audit records (other log lines in a collector's copy) are skipped when they do not parse."""
    problems: list[str] = []
    expected_seq, previous, count = 1, GENESIS, 0
    for number, line in enumerate(lines, 1):
        text = line.rstrip("\n")
        try:
            record = json.loads(text)
            seq, prev = int(record["seq"]), str(record["prev"])
        except (ValueError, KeyError, TypeError):
            continue
        if seq != expected_seq:
            problems.append(
                f"line {number}: record {seq} where record {expected_seq} was due (records removed?)"
            )
        elif prev != previous:
            problems.append(
                f"line {number}: record {seq} does not follow the line before it (edited or removed)"
            )
        expected_seq, previous, count = seq + 1, line_hash(text), count + 1
    if head is not None and previous != head:
        problems.append(f"the trail ends at {previous[:16]}..., not at the expected head {head[:16]}...")
    return problems, count, previous
