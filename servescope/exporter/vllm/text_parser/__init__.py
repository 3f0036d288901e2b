"""Fast Prometheus text-exposition parser that agrees exactly with prometheus_client's own parser.

Nearly every line of a real exposition is `name{labels} value` or `# HELP|TYPE name ...`: those take a fast
path of a few string operations and lookups in what the parser remembers about each series (memory.py).
Any other line goes to a slow path that follows prometheus_client 0.26's parser rule by rule (rules.py), so
that both agree on every input; tests/vllm/test_text_parser.py checks it differentially.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from servescope.exporter.vllm.text_parser.families import Families
from servescope.exporter.vllm.text_parser.memory import CACHE_LIMIT, SeriesMemory
from servescope.exporter.vllm.text_parser.model import ExpositionError, ParsedFamily, ParsedSample

__all__ = ["ExpositionError", "ExpositionParser", "ParsedFamily", "ParsedSample", "parse_exposition"]


class ExpositionParser:
    """A parser remembering the series it has read: one per scraped server, used by one thread at a time."""

    __slots__ = ("_memory",)

    def __init__(self, cache_limit: int = CACHE_LIMIT) -> None:
        self._memory = SeriesMemory(cache_limit)

    def parse(self, text: str, keep: Callable[[str], bool] | None = None) -> list[ParsedFamily]:
        """Parse text exposition exactly as prometheus_client does, keeping only families `keep` accepts."""
        families = Families(keep, self._memory)
        families.feed(text)
        return families.done


_per_thread = threading.local()


def parse_exposition(text: str, keep: Callable[[str], bool] | None = None) -> list[ParsedFamily]:
    """`ExpositionParser.parse` with the calling thread's own parser, for callers that hold none."""
    parser: ExpositionParser | None = getattr(_per_thread, "parser", None)
    if parser is None:
        parser = _per_thread.parser = ExpositionParser()
    return parser.parse(text, keep)
