"""Fast Prometheus text-exposition parser that agrees exactly with prometheus_client's own parser.

Nearly every line of a real exposition is `name{labels} value` or `# HELP|TYPE name ...`: those take a fast
path of a few string operations and lookups in what the parser remembers about each series (memory.py).
Any other line goes to a slow path that follows prometheus_client 0.26's parser rule by rule (rules.py), so
that both agree on every input; tests/vllm/test_text_parser.py checks it differentially.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from servescope.core.exposition.families import Families
from servescope.core.exposition.limits import SeriesLimits, limit_label_values
from servescope.core.exposition.memory import CACHE_LIMIT, SeriesMemory
from servescope.core.exposition.model import ExpositionError, ParsedFamily, ParsedSample

__all__ = [
    "ExpositionError",
    "ExpositionParser",
    "ParsedFamily",
    "ParsedSample",
    "SeriesLimits",
    "parse_exposition",
]


class ExpositionParser:
    """A parser remembering the series it has read: one per scraped server, used by one thread at a time.

    With `limits`, what one page may make it hold is bounded (limits.py): samples past a limit are
    dropped and counted in `dropped` (that of the last parse), and it remembers at most
    `limits.max_series` series, forgetting them all when two pages in a row were mostly new series.
    """

    __slots__ = ("_churned", "_limits", "_memory", "dropped")

    def __init__(self, cache_limit: int = CACHE_LIMIT, limits: SeriesLimits | None = None) -> None:
        if limits is not None:
            cache_limit = min(cache_limit, limits.max_series)
        self._memory = SeriesMemory(cache_limit, limits)
        self._limits = limits
        self._churned = False
        self.dropped: Counter[str] = Counter()

    def parse(self, text: str, keep: Callable[[str], bool] | None = None) -> list[ParsedFamily]:
        """Parse text exposition exactly as prometheus_client does, keeping only families `keep` accepts."""
        families = Families(keep, self._memory)
        self._memory.learnt = 0
        families.feed(text)
        done = families.done
        if self._limits is not None:
            done = limit_label_values(done, self._limits.max_label_values, families.dropped)
            self._forget_churn(text)
        self.dropped = families.dropped
        return done

    def _forget_churn(self, text: str) -> None:
        # A server whose pages are mostly new series (fresh label values every scrape) would keep the
        # caches full of series never seen again; the second such page in a row empties them.
        churned = self._memory.learnt * 2 > text.count("\n") + 1
        if churned and self._churned:
            self._memory.forget()
        self._churned = churned


_per_thread = threading.local()


def parse_exposition(text: str, keep: Callable[[str], bool] | None = None) -> list[ParsedFamily]:
    """`ExpositionParser.parse` with the calling thread's own parser, for callers that hold none."""
    parser: ExpositionParser | None = getattr(_per_thread, "parser", None)
    if parser is None:
        parser = _per_thread.parser = ExpositionParser()
    return parser.parse(text, keep)
