"""Lines to families, grouped by prometheus_client's rules; `keep` decides which families are parsed."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable

from servescope.core.exposition.limits import LabelsRefusedError, check_labels
from servescope.core.exposition.memory import SeriesMemory, sample_name
from servescope.core.exposition.model import (
    ExpositionError,
    ParsedFamily,
    ParsedSample,
    make_sample,
    new_sample,
    set_sample_labels,
    set_sample_name,
    set_sample_value,
)
from servescope.core.exposition.rules import (
    ASCII_SPACE,
    HELP_ESCAPE,
    TYPES,
    check_family,
    family_name,
    slow_directive,
    slow_sample,
    unescape,
)

_DIRECTIVES = {"# HELP ": "HELP", "# TYPE ": "TYPE"}
_SUFFIXES = {"summary": ("_count", "_sum", ""), "histogram": ("_count", "_sum", "_bucket")}


class Families:
    """The family being read and those finished, grouped by prometheus_client's rules."""

    __slots__ = (
        "allowed",
        "deferred",
        "doc",
        "done",
        "dropped",
        "keep",
        "lineno",
        "memory",
        "name",
        "parsing",
        "rows",
        "spare",
        "typ",
    )

    def __init__(self, keep: Callable[[str], bool] | None, memory: SeriesMemory) -> None:
        self.keep = keep
        self.memory = memory
        self.done: list[ParsedFamily] = []
        self.dropped: Counter[str] = Counter()  # samples refused by the limits, by reason
        # How many more samples may be kept (memory.limits); counted down on the fast path.
        self.spare = sys.maxsize if memory.limits is None else memory.limits.max_series
        self.doc = ""
        self._begin("", "untyped", (), 0)

    def feed(self, text: str) -> None:
        # One long loop on purpose: it runs for every line of every scrape, and each call or attribute
        # lookup taken out of it costs a measurable share of the parser's budget (bench/ingest.py).
        heads, learn = self.memory.heads, self.memory.learn
        new, set_name, set_labels = new_sample, set_sample_name, set_sample_labels
        set_value = set_sample_value
        for lineno, raw in enumerate(text.split("\n"), 1):
            line = raw.strip()
            if not line:
                continue
            if line[0] == "#":
                self._comment(lineno, line)
                continue
            if not self.parsing:
                self._skip(lineno, line)
                continue
            # The fast path, inline because it runs for nearly every line: `name{labels} value`.
            head, _, number = line.rpartition(" ")
            try:
                name, labels = heads.get(head) or learn(head)
                if "_" in number:
                    raise ValueError(number)  # refused upstream, though float() takes it
                value = float(number)
            except ValueError as exc:
                found = self._unusual(lineno, line, exc)
                if found is None:
                    continue
                sample = found
            else:
                sample = new(ParsedSample)
                set_name(sample, name)
                set_labels(sample, labels.copy())
                set_value(sample, value)
            if sample.name in self.allowed:
                if self.spare > 0:
                    self.spare -= 1
                    self.rows.append(sample)
                else:
                    self.dropped["series_limit"] += 1
            else:
                self._singleton(lineno, line, sample.name, sample)
        self._close()

    def _unusual(self, lineno: int, line: str, error: ValueError) -> ParsedSample | None:
        """A line the fast path did not take: refused by the limits (None, counted), or the slow path's."""
        if isinstance(error, LabelsRefusedError):
            self.dropped[error.reason] += 1
            return None
        return self._slow(lineno, line)

    def _slow(self, lineno: int, line: str) -> ParsedSample | None:
        """Any sample line, as prometheus_client reads it; None when the limits refuse its labels."""
        try:
            name, labels, value = slow_sample(line)
        except ValueError as exc:
            raise ExpositionError(f"line {lineno}: {exc}") from None
        limits = self.memory.limits
        if limits is not None:
            try:
                check_labels(labels, max(map(len, labels.values()), default=0), limits)
            except LabelsRefusedError as refused:
                self.dropped[refused.reason] += 1
                return None
        return make_sample(name, labels, value)

    def _parse(self, lineno: int, line: str) -> ParsedSample | None:
        try:
            return self.memory.fast_sample(line)
        except LabelsRefusedError as refused:
            self.dropped[refused.reason] += 1
            return None
        except ValueError:
            return self._slow(lineno, line)

    def _kept(self, samples: list[ParsedSample | None]) -> list[ParsedSample]:
        """The samples neither refused nor past the series limit (those are counted)."""
        found = [sample for sample in samples if sample is not None]
        taken = found[: max(self.spare, 0)]
        self.spare -= len(taken)
        if len(taken) < len(found):
            self.dropped["series_limit"] += len(found) - len(taken)
        return taken

    def _begin(self, name: str, typ: str, allowed: tuple[str, ...], lineno: int) -> None:
        self.name, self.typ, self.allowed, self.lineno = name, typ, allowed, lineno
        self.rows: list[ParsedSample] = []
        self.deferred: list[tuple[int, str]] = []
        self.parsing = self.keep is None or self._wanted()

    def _wanted(self) -> bool:
        """Whether `keep` wants the family as named so far; its lines wait unparsed until it does."""
        assert self.keep is not None
        wanted = self.name != "" and self.keep(family_name(self.name, self.typ))
        if wanted and self.deferred:
            self.rows += self._kept([self._parse(n, line) for n, line in self.deferred])
            self.deferred = []
        return wanted

    def _skip(self, lineno: int, line: str) -> None:
        """A sample line of a family `keep` may not want: only its name is read."""
        head, _, number = line.rpartition(" ")
        # A `{` in what follows the last space would start the labels: that head is not a series.
        known = self.memory.heads.get(head) if "{" not in number else None
        name = known[0] if known is not None else sample_name(line)
        if name is None:
            parsed = self._parse(lineno, line)
            if parsed is None:
                return  # refused by the limits (and counted)
            name = parsed.name
        if name in self.allowed:
            self.deferred.append((lineno, line))
        else:
            self._singleton(lineno, line, name, None)

    def _comment(self, lineno: int, line: str) -> None:
        # Fast path: `# HELP name doc` or `# TYPE name type`, single spaces and a plain name.
        kind = _DIRECTIVES.get(line[:7])
        if kind is not None:
            name, _, rest = line[7:].partition(" ")
            if not rest or rest[0] in ASCII_SPACE or self.memory.plain_name(name) is None:
                kind = None
        if kind is None:
            try:
                directive = slow_directive(line)
            except ValueError as exc:
                raise ExpositionError(f"line {lineno}: {exc}") from None
            if directive is None:
                return
            kind, name, rest = directive[0], directive[1], directive[2] or ""
        if kind == "HELP":
            if name != self.name:
                self._close()
                self._begin(name, "untyped", (name,), lineno)
            self.doc = unescape(HELP_ESCAPE, rest) if "\\" in rest else rest
        elif kind == "TYPE":
            self._retype(lineno, name, rest)

    def _retype(self, lineno: int, name: str, typ: str) -> None:
        if not typ:
            raise ExpositionError(f"line {lineno}: TYPE needs a metric name and a type")
        suffixes = _SUFFIXES.get(typ)
        allowed = (name,) if suffixes is None else tuple([name + suffix for suffix in suffixes])
        if name != self.name:
            self._close()
            self.doc = ""
            self._begin(name, typ, allowed, lineno)
        else:  # a TYPE after the HELP or the samples of its family retypes the family
            self.typ, self.allowed, self.lineno = typ, allowed, lineno
            self.parsing = self.keep is None or self._wanted()

    def _singleton(self, lineno: int, line: str, name: str, sample: ParsedSample | None) -> None:
        """A sample outside the current family ends it and forms an untyped family of its own."""
        self._close()
        self.doc = ""
        self._begin("", "untyped", (), lineno)
        check_family(lineno, name, "unknown")
        if self.keep is None or self.keep(name):
            samples = self._kept([sample or self._parse(lineno, line)])
            if samples:
                self.done.append(ParsedFamily(name, "unknown", "", samples))

    def _close(self) -> None:
        """Finish the current family; prometheus_client silently drops one named by an empty string."""
        if not self.name:
            return
        name = family_name(self.name, self.typ)
        typ = "unknown" if self.typ == "untyped" else self.typ
        if not (name and name.isascii() and typ in TYPES):
            check_family(self.lineno, name, typ)
        if self.keep is not None and not self.keep(name):
            return
        samples = self.rows
        if self.deferred:
            samples += self._kept([self._parse(n, line) for n, line in self.deferred])
        if typ == "counter" and name == self.name:
            # Samples of a counter whose TYPE name lacks `_total` get it appended, as upstream does.
            samples = [make_sample(s.name + "_total", s.labels, s.value) for s in samples]
        self.done.append(ParsedFamily(name, typ, self.doc, samples))
