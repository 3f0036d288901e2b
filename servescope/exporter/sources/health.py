"""Per-source health: what /readyz judges and what the source_* series report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

STALE_AFTER_INTERVALS = 3.0


@dataclass(slots=True)
class SourceHealth:
    """Mutated only by the source's own runner thread; readers take a consistent-enough view."""

    name: str
    interval_seconds: float
    up: bool = False
    last_success_wall: float = 0.0
    last_success_mono: float | None = None
    last_duration_seconds: float = 0.0
    last_error: str | None = None
    absent: bool = False  # what the source reads is not installed here: down, but not blocking readiness
    optional: bool = False  # it only enriches other series (pod revisions): down, but not blocking readiness
    errors: Counter[str] = field(default_factory=Counter)
    unready: str | None = None  # the last collection succeeded but cannot see what it should (why)
    report: dict[str, object] | None = None  # the source's own account, for /api/v1/sources

    @property
    def is_absent(self) -> bool:
        """Down because what it reads is not installed here (a later success makes it up again)."""
        return self.absent and not self.up

    def readiness(self, now_mono: float) -> tuple[bool, str]:
        """Ready when it has succeeded once and not more than 3 intervals ago."""
        if self.is_absent:
            return True, f"absent (not blocking readiness): {self.last_error}"
        if self.optional and not self.up:
            return True, f"failing, an enrichment (not blocking readiness): {self.last_error or 'starting'}"
        if self.last_success_mono is None:
            why = self.last_error or "no collection has finished yet"
            return False, f"never succeeded: {why}"
        age = now_mono - self.last_success_mono
        limit = STALE_AFTER_INTERVALS * self.interval_seconds
        if age > limit:
            detail = f"; last error: {self.last_error}" if self.last_error and not self.up else ""
            return False, f"stale: last success {age:.1f} s ago (limit {limit:.1f} s){detail}"
        if not self.up:
            return True, f"last collection failed: {self.last_error}"
        if self.unready is not None:
            return False, self.unready
        return True, "ok"
