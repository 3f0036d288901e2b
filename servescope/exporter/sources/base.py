"""What a source is: something that collects samples on its own interval and may fail."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from servescope.core.errors import ServescopeError
from servescope.exporter.exposition import Sample


class SourceError(ServescopeError):
    """The whole collection failed; `reason` becomes the errors_total label (snake_case, bounded)."""

    reason = "collect_failed"

    def __init__(self, reason: str, message: str, *, absent: bool = False) -> None:
        super().__init__(message, reason=reason)
        self.message = message
        # absent: what the source reads is not installed on this node (node_exporter's "not present"):
        # still down and counted, but it does not hold readiness back.
        self.absent = absent


@dataclass(frozen=True, slots=True)
class Problem:
    """A partial failure: counted and logged, while the source's other samples are still exported."""

    reason: str
    message: str


@dataclass(slots=True)
class Collection:
    samples: list[Sample] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    raw: str | None = None  # exposition text of families outside the catalog (passed-through series)
    # Why the node's exporter is not ready although this collection succeeded (it cannot see what it
    # should: engines it cannot reach); None when nothing holds readiness back.
    unready: str | None = None
    report: dict[str, object] | None = None  # what /api/v1/sources adds for this source


class Source(Protocol):
    name: str
    interval_seconds: float

    def collect(self) -> Collection:
        """Collect once; raise SourceError when nothing usable came back."""
        ...

    def close(self) -> None:
        """Release what the source holds (threads, handles, child processes)."""
        ...
