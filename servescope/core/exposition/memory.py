"""The fast path's memory: what each series' text (name and labels) means, learnt once, looked up after."""

from __future__ import annotations

import re
from typing import TypeVar

from servescope.core.exposition.limits import SeriesLimits, check_labels
from servescope.core.exposition.model import ParsedSample, make_sample
from servescope.core.exposition.rules import PLAIN_NAME

# Label sets the fast path takes: plain label names that are not reserved (`__` prefix) and values without
# quotes or escapes, so every `}` inside them is quoted and the set ends at the `}` before the value.
_FAST_PIECE = re.compile(r'((?:[a-zA-Z]|_(?!_))[a-zA-Z0-9_]*)="([^"\\]*)')
# Every scrape of a server repeats the same series, so they are remembered across calls; the bound keeps
# hostile input from growing the memory without end.
CACHE_LIMIT = 1 << 15
_Value = TypeVar("_Value")


class SeriesMemory:
    """Series heads (`name{labels}`) to their name and labels, for one parser (never shared by threads)."""

    __slots__ = ("heads", "label_sets", "learnt", "limit", "limits", "names", "pairs")

    def __init__(self, limit: int = CACHE_LIMIT, limits: SeriesLimits | None = None) -> None:
        self.limit = limit
        self.limits = limits  # None: any series is accepted (prometheus_client's behaviour)
        self.learnt = 0  # series learnt since the count was last reset: how much a server's series churn
        self.heads: dict[str, tuple[str, dict[str, str]]] = {}
        self.label_sets: dict[str, dict[str, str]] = {}
        self.names: dict[str, str] = {}  # each plain name to one shared copy of it
        self.pairs: dict[str, tuple[str, str]] = {}

    def _keep(self, cache: dict[str, _Value], key: str, value: _Value) -> _Value:
        """Remember `value` under `key`; a full cache is dropped first (every entry can be relearnt)."""
        if len(cache) >= self.limit:
            cache.clear()
        cache[key] = value
        return value

    def plain_name(self, name: str) -> str | None:
        """The shared copy of a plain metric name, or None when the name is not plain."""
        known = self.names.get(name)
        if known is not None or PLAIN_NAME.fullmatch(name) is None:
            return known
        return self._keep(self.names, name, name)

    def label_pair(self, piece: str) -> tuple[str, str]:
        """Name and value of a `name="value` piece of a plain label set (its closing quote split off)."""
        pair = self.pairs.get(piece)
        if pair is None:
            pair = self._keep(self.pairs, piece, _pair(piece))
        return pair

    def label_set(self, text: str) -> dict[str, str]:
        """The labels of a plain label set (raises ValueError for any other); remembered."""
        labels = self.label_sets.get(text)
        if labels is not None:
            return labels
        # Values hold no quote, so `",` ends every pair but the last: `a="1",b="2"` -> `a="1`, `b="2"`.
        pieces = text.split('",')
        last = pieces.pop()
        if last:  # else the set was empty or ended with a comma, which prometheus_client allows
            if last[-1] != '"':
                raise ValueError("not a plain label set")
            pieces.append(last[:-1])
        limits = self.limits
        if limits is not None and len(text) > limits.max_label_value_length:
            # Possibly a value over the limit: its pieces are not remembered before it is checked.
            pairs = [_pair(piece) for piece in pieces]
        else:
            pairs = [self.label_pair(piece) for piece in pieces]
        labels = dict(pairs)
        if len(labels) != len(pairs):
            raise ValueError("duplicate label")
        if limits is not None:
            check_labels(labels, len(text), limits)
        return self._keep(self.label_sets, text, labels)

    def learn(self, head: str) -> tuple[str, dict[str, str]]:
        """Name and labels of a plain `name` or `name{labels}` (ValueError for any other); remembered."""
        brace = head.find("{")
        if brace < 0:
            name, labels = self.plain_name(head), {}
        elif head[-1] == "}":
            name, labels = self.plain_name(head[:brace]), self.label_set(head[brace + 1 : -1])
        else:
            raise ValueError("not a plain sample")
        if name is None:
            raise ValueError("not a plain name")  # also a line with a timestamp: its head holds a space
        self.learnt += 1
        return self._keep(self.heads, head, (name, labels))

    def forget(self) -> None:
        """Drop everything remembered (a server whose series never repeat gains nothing from it)."""
        for cache in (self.heads, self.label_sets, self.names, self.pairs):
            cache.clear()

    def fast_sample(self, line: str) -> ParsedSample:
        """A plain `name{labels} value` line; ValueError for any other, which the slow path then takes."""
        head, _, number = line.rpartition(" ")
        name, labels = self.heads.get(head) or self.learn(head)
        if "_" in number:
            raise ValueError(number)  # refused upstream, though float() takes it
        return make_sample(name, labels.copy(), float(number))


def _pair(piece: str) -> tuple[str, str]:
    match = _FAST_PIECE.fullmatch(piece)
    if match is None:
        raise ValueError("not a plain label set")
    return match[1], match[2]


def sample_name(line: str) -> str | None:
    """The metric name of a plain sample line without parsing the rest, or None when not plain."""
    match = PLAIN_NAME.match(line)
    if match is not None and match.end() < len(line):
        after = line[match.end()]
        if after == "{" or (after in " \t" and "{" not in line):
            return match.group()
    return None
