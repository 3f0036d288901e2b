"""Fast Prometheus text-exposition parser that agrees exactly with prometheus_client's own parser."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# Nearly every line of a real exposition is `name{labels} value` or `# HELP|TYPE name ...`: those take a fast
# path of a few string operations and remembered lookups. Any other line goes to a slow path that follows
# prometheus_client 0.26's parser rule by rule, quirks included (with its default, non-legacy name
# validation), so that both agree on every input; tests/vllm/test_text_parser.py checks it differentially.

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_PLAIN_NAME = re.compile(_NAME)
# `$` rather than `\Z` because prometheus_client's check accepts a trailing newline (from an escaped `\n`).
_LEGACY_NAME = re.compile(_NAME + "$")
_RESERVED_LABEL = re.compile("__.*$")
# Label sets the fast path takes: plain label names that are not reserved (`__` prefix) and values without
# quotes or escapes, so every `}` inside them is quoted and the set ends at the `}` before the value.
_FAST_PIECE = re.compile(r'((?:[a-zA-Z]|_(?!_))[a-zA-Z0-9_]*)="([^"\\]*)')
_LABEL_ESCAPE = re.compile(r'\\[\\n"]')
_HELP_ESCAPE = re.compile(r"\\[\\n]")
_UNESCAPED = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_ASCII_SPACE = " \t\n\r\x0b\x0c"
_DIRECTIVES = {"# HELP ": "HELP", "# TYPE ": "TYPE"}
_SUFFIXES = {"summary": ("_count", "_sum", ""), "histogram": ("_count", "_sum", "_bucket")}
_TYPES = {"counter", "gauge", "summary", "histogram", "gaugehistogram", "unknown", "info", "stateset"}

# Every scrape of a server repeats the same series, so the meaning of a series' text (name and labels) is
# remembered across calls; the bound keeps hostile input from growing the memory without end.
_CACHE_LIMIT = 1 << 15
_HEADS: dict[str, tuple[str, dict[str, str]]] = {}
_LABEL_SETS: dict[str, dict[str, str]] = {}
_NAMES: dict[str, str] = {}  # each plain name to one shared copy of it
_PAIRS: dict[str, tuple[str, str]] = {}

_Row = tuple[str, dict[str, str], float]


@dataclass(frozen=True, slots=True)
class ParsedSample:
    """One sample: metric name, labels and value (a timestamp after the value is checked, not kept)."""

    name: str
    labels: dict[str, str]
    value: float


@dataclass(slots=True)
class ParsedFamily:
    """One metric family; `type` is prometheus_client's string ("unknown" where the text says untyped)."""

    name: str
    type: str
    documentation: str
    samples: list[ParsedSample]


class ExpositionError(ValueError):
    """Input that is not valid text exposition; message starts with `line N: `."""


# The frozen dataclass's own __init__ (three object.__setattr__ calls) costs a third of a line's budget;
# filling the slots directly builds the very same object twice as fast.
_new = object.__new__
_set_name = ParsedSample.__dict__["name"].__set__
_set_labels = ParsedSample.__dict__["labels"].__set__
_set_value = ParsedSample.__dict__["value"].__set__


def _sample(name: str, labels: dict[str, str], value: float) -> ParsedSample:
    sample: ParsedSample = _new(ParsedSample)
    _set_name(sample, name)
    _set_labels(sample, labels)
    _set_value(sample, value)
    return sample


def _forget() -> None:
    """Drop what earlier calls learnt about series (a benchmark of a first scrape calls this)."""
    _HEADS.clear()
    _LABEL_SETS.clear()
    _NAMES.clear()
    _PAIRS.clear()


def _plain_name(name: str) -> str | None:
    """The shared copy of a plain metric name, or None when the name is not plain."""
    known = _NAMES.get(name)
    if known is not None or _PLAIN_NAME.fullmatch(name) is None:
        return known
    if len(_NAMES) >= _CACHE_LIMIT:
        _NAMES.clear()
    _NAMES[name] = name
    return name


def _unescape(pattern: re.Pattern[str], text: str) -> str:
    if "\\" not in text:
        return text
    return pattern.sub(lambda m: _UNESCAPED[m.group()], text)


def _unquoted_find(text: str, chars: str, start: int = 0) -> int:
    """Index of the first of `chars` at or after `start` outside double quotes, or -1."""
    slashes = 0
    while start - slashes > 0 and text[start - slashes - 1] == "\\":
        slashes += 1
    in_quotes = False
    for i in range(start, len(text)):
        char = text[i]
        if char == '"' and slashes % 2 == 0:
            in_quotes = not in_quotes
        elif not in_quotes and char in chars:
            return i
        slashes = slashes + 1 if char == "\\" else 0
    return -1


def _unquote(text: str) -> tuple[str, bool]:
    """A name token without its quotes and escapes, and whether it was quoted."""
    if not text:
        return text, False
    text = text.strip()
    if not text:
        raise ValueError("blank name")
    quoted = text[0] == '"'
    if quoted:
        if len(text) == 1 or text[-1] != '"':
            raise ValueError(f"missing closing quote in {text!r}")
        text = text[1:-1]
    return _unescape(_LABEL_ESCAPE, text), quoted


def _number(token: str) -> float:
    if "_" in token:
        raise ValueError(f"invalid number {token!r}")
    return float(token)


def _value(text: str) -> float:
    """The sample value; a timestamp (the last of several tokens) must be a number but is dropped."""
    text = text.lstrip()
    tokens = [t.strip() for t in text.split(" " if " " in text else "\t") if t.strip()]
    if not tokens:
        raise ValueError("missing value")
    value = _number(tokens[0])
    if len(tokens) > 1:
        stamp = tokens[-1]
        _number(stamp)
        try:
            int(stamp) / 1000  # prometheus_client divides the integer; a huge one overflows
        except ValueError:
            pass  # not an integer: the float above was fine
        except OverflowError:
            raise ValueError(f"timestamp out of range {stamp[:20]!r}...") from None
    return value


def _next_term(text: str) -> tuple[str, str, str]:
    """The next `name=value` term of a label set: raw name, stripped value, stripped rest."""
    if text[0] == ",":
        text = text[1:]
        if not text:
            return "", "", ""
        if text[0] == ",":
            raise ValueError("multiple commas")
    split = _unquoted_find(text, "=,}")
    name = "__name__"  # a bare quoted term names the metric
    if split >= 0 and text[split] == "=":
        name, text = text[:split], text[split + 1 :]
        split = _unquoted_find(text, ",}")
    if split == -1:
        split = len(text)
    rest = text[split:].strip()
    if rest and rest[0] != ",":
        raise ValueError("unexpected `}`")  # unreachable from a line; guards against looping
    return name, text[:split].strip(), rest


def _closing_quote(term: str) -> int:
    at = term.find('"', 1)
    while at != -1:
        slashes = 0
        while term[at - slashes - 1] == "\\":
            slashes += 1
        if slashes % 2 == 0:
            return at
        at = term.find('"', at + 1)
    return -1


def _labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    rest = text.strip()
    while rest:
        raw_name, term, rest = _next_term(rest)
        if not term:
            continue  # prometheus_client silently drops `name=` without a value
        name, quoted = _unquote(raw_name)
        if not quoted and not _LEGACY_NAME.match(name):
            raise ValueError(f"invalid label name {name!r}")
        if term[0] != '"' or _closing_quote(term) != len(term) - 1:
            raise ValueError(f"badly quoted label value {term!r}")
        if name != "__name__":
            name.encode("utf-8")
            if _RESERVED_LABEL.match(name):
                raise ValueError(f"reserved label name {name!r}")
        if name in labels:
            raise ValueError(f"duplicate label {name!r}")
        labels[name] = _unescape(_LABEL_ESCAPE, term[1:-1])
    return labels


def _slow_sample(line: str) -> _Row:
    """Any sample line, with every quirk of prometheus_client's `_parse_sample`."""
    label_start = _unquoted_find(line, "{")
    if label_start == -1 or " # " in line[:label_start]:
        name_end = _unquoted_find(line, " \t")
        name = line[:name_end].strip()  # with no separator this drops the last character, as upstream does
        if not _LEGACY_NAME.match(name):
            raise ValueError(f"invalid metric name {name!r}")
        return name, {}, _value(line[name_end + 1 :])
    label_end = _unquoted_find(line, "}", label_start)
    if label_end == -1:
        raise ValueError("labels not closed")
    labels = _labels(line[label_start + 1 : label_end])
    name = line[:label_start].strip()
    if not name:
        if "__name__" not in labels:
            raise ValueError("no metric name")
        name = labels.pop("__name__")
    elif "__name__" in labels:
        raise ValueError("metric name given twice")
    return name, labels, _value(line[label_end + 1 :])


def _label_pair(piece: str) -> tuple[str, str]:
    """Name and value of a `name="value` piece of a plain label set (its closing quote split off)."""
    pair = _PAIRS.get(piece)
    if pair is None:
        match = _FAST_PIECE.fullmatch(piece)
        if match is None:
            raise ValueError("not a plain label set")
        pair = match[1], match[2]
        if len(_PAIRS) >= _CACHE_LIMIT:
            _PAIRS.clear()
        _PAIRS[piece] = pair
    return pair


def _label_set(text: str) -> dict[str, str]:
    """The labels of a plain label set (raises ValueError for any other); remembered."""
    labels = _LABEL_SETS.get(text)
    if labels is not None:
        return labels
    # Values hold no quote, so `",` ends every pair but the last: `a="1",b="2"` -> `a="1`, `b="2"`.
    pieces = text.split('",')
    last = pieces.pop()
    if last:  # else the set was empty or ended with a comma, which prometheus_client allows
        if last[-1] != '"':
            raise ValueError("not a plain label set")
        pieces.append(last[:-1])
    pairs = [_label_pair(piece) for piece in pieces]
    labels = dict(pairs)
    if len(labels) != len(pairs):
        raise ValueError("duplicate label")
    if len(_LABEL_SETS) >= _CACHE_LIMIT:
        _LABEL_SETS.clear()
    _LABEL_SETS[text] = labels
    return labels


def _learn(head: str) -> tuple[str, dict[str, str]]:
    """Name and labels of a plain `name` or `name{labels}` (raises ValueError for any other); remembered."""
    brace = head.find("{")
    if brace < 0:
        name, labels = _plain_name(head), {}
    elif head[-1] == "}":
        name, labels = _plain_name(head[:brace]), _label_set(head[brace + 1 : -1])
    else:
        raise ValueError("not a plain sample")
    if name is None:
        raise ValueError("not a plain name")  # also a line with a timestamp: its head holds a space
    if len(_HEADS) >= _CACHE_LIMIT:
        _HEADS.clear()
    _HEADS[head] = name, labels
    return name, labels


def _fast_sample(line: str) -> ParsedSample:
    """A plain `name{labels} value` line; raises ValueError for any other, which the slow path then takes."""
    head, _, number = line.rpartition(" ")
    name, labels = _HEADS.get(head) or _learn(head)
    if "_" in number:
        raise ValueError(number)  # refused upstream, though float() takes it
    return _sample(name, labels.copy(), float(number))


def _sample_name(line: str) -> str | None:
    """The metric name of a plain sample line without parsing the rest, or None when not plain."""
    match = _PLAIN_NAME.match(line)
    if match is not None and match.end() < len(line):
        after = line[match.end()]
        if after == "{" or (after in " \t" and "{" not in line):
            return match.group()
    return None


def _comment_parts(line: str) -> list[str]:
    """A comment's first three tokens and the rest, split as prometheus_client does (quotes group)."""
    parts: list[str] = []
    pos = 0
    while pos < len(line):
        if line[pos] in _ASCII_SPACE:
            pos += 1
        elif len(parts) == 3:
            parts.append(line[pos:])
            break
        else:
            stop = _unquoted_find(line, _ASCII_SPACE, pos)
            parts.append(line[pos:] if stop == -1 else line[pos:stop])
            pos = len(line) if stop == -1 else stop + 1
    return parts


def _slow_directive(line: str) -> tuple[str, str, str | None] | None:
    """HELP or TYPE, the metric name and the rest of any comment line; None for other comments."""
    parts = _comment_parts(line)
    if len(parts) < 2 or parts[1] not in ("HELP", "TYPE"):
        return None
    name = ""
    if len(parts) > 2:
        name, quoted = _unquote(parts[2])
        if not quoted and not _LEGACY_NAME.match(name):
            raise ValueError(f"invalid metric name {name!r}")
    return parts[1], name, parts[3] if len(parts) > 3 else None


def _family_name(name: str, typ: str) -> str:
    return name[:-6] if typ == "counter" and name.endswith("_total") else name


def _check_family(lineno: int, name: str, typ: str) -> None:
    """What prometheus_client's `Metric` refuses when it builds a family."""
    if not name:
        raise ExpositionError(f"line {lineno}: empty metric family name")
    if not name.isascii():
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise ExpositionError(f"line {lineno}: metric name {name!r} is not valid UTF-8") from None
    if typ not in _TYPES:
        raise ExpositionError(f"line {lineno}: invalid metric type {typ!r}")


class _Families:
    """The family being read and those finished, grouped by prometheus_client's rules."""

    __slots__ = ("allowed", "deferred", "doc", "done", "keep", "lineno", "name", "parsing", "rows", "typ")

    def __init__(self, keep: Callable[[str], bool] | None) -> None:
        self.keep = keep
        self.done: list[ParsedFamily] = []
        self.doc = ""
        self._begin("", "untyped", (), 0)

    def feed(self, text: str) -> None:
        heads, new, set_name, set_labels, set_value = _HEADS, _new, _set_name, _set_labels, _set_value
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
                name, labels = heads.get(head) or _learn(head)
                if "_" in number:
                    raise ValueError(number)  # refused upstream, though float() takes it
                value = float(number)
            except ValueError:
                sample = self._slow(lineno, line)
            else:
                sample = new(ParsedSample)
                set_name(sample, name)
                set_labels(sample, labels.copy())
                set_value(sample, value)
            if sample.name in self.allowed:
                self.rows.append(sample)
            else:
                self._singleton(lineno, line, sample.name, sample)
        self._close()

    def _slow(self, lineno: int, line: str) -> ParsedSample:
        try:
            return _sample(*_slow_sample(line))
        except ValueError as exc:
            raise ExpositionError(f"line {lineno}: {exc}") from None

    def _parse(self, lineno: int, line: str) -> ParsedSample:
        try:
            return _fast_sample(line)
        except ValueError:
            return self._slow(lineno, line)

    def _begin(self, name: str, typ: str, allowed: tuple[str, ...], lineno: int) -> None:
        self.name, self.typ, self.allowed, self.lineno = name, typ, allowed, lineno
        self.rows: list[ParsedSample] = []
        self.deferred: list[tuple[int, str]] = []
        self.parsing = self.keep is None or self._wanted()

    def _wanted(self) -> bool:
        """Whether `keep` wants the family as named so far; its lines wait unparsed until it does."""
        assert self.keep is not None
        wanted = self.name != "" and self.keep(_family_name(self.name, self.typ))
        if wanted and self.deferred:
            self.rows += [self._parse(n, line) for n, line in self.deferred]
            self.deferred = []
        return wanted

    def _skip(self, lineno: int, line: str) -> None:
        """A sample line of a family `keep` may not want: only its name is read."""
        head, _, number = line.rpartition(" ")
        known = _HEADS.get(head) if "{" not in number else None  # a `{` there would start the labels
        name = known[0] if known is not None else _sample_name(line) or self._parse(lineno, line).name
        if name in self.allowed:
            self.deferred.append((lineno, line))
        else:
            self._singleton(lineno, line, name, None)

    def _comment(self, lineno: int, line: str) -> None:
        # Fast path: `# HELP name doc` or `# TYPE name type`, single spaces and a plain name.
        kind = _DIRECTIVES.get(line[:7])
        if kind is not None:
            name, _, rest = line[7:].partition(" ")
            if not rest or rest[0] in _ASCII_SPACE or _plain_name(name) is None:
                kind = None
        if kind is None:
            try:
                directive = _slow_directive(line)
            except ValueError as exc:
                raise ExpositionError(f"line {lineno}: {exc}") from None
            if directive is None:
                return
            kind, name, rest = directive[0], directive[1], directive[2] or ""
        if kind == "HELP":
            if name != self.name:
                self._close()
                self._begin(name, "untyped", (name,), lineno)
            self.doc = _unescape(_HELP_ESCAPE, rest) if "\\" in rest else rest
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
        _check_family(lineno, name, "unknown")
        if self.keep is None or self.keep(name):
            self.done.append(ParsedFamily(name, "unknown", "", [sample or self._parse(lineno, line)]))

    def _close(self) -> None:
        """Finish the current family; prometheus_client silently drops one named by an empty string."""
        if not self.name:
            return
        name = _family_name(self.name, self.typ)
        typ = "unknown" if self.typ == "untyped" else self.typ
        if not (name and name.isascii() and typ in _TYPES):
            _check_family(self.lineno, name, typ)
        if self.keep is not None and not self.keep(name):
            return
        samples = self.rows
        if self.deferred:
            samples += [self._parse(n, line) for n, line in self.deferred]
        if typ == "counter" and name == self.name:
            # Samples of a counter whose TYPE name lacks `_total` get it appended, as upstream does.
            samples = [_sample(s.name + "_total", s.labels, s.value) for s in samples]
        self.done.append(ParsedFamily(name, typ, self.doc, samples))


def parse_exposition(text: str, keep: Callable[[str], bool] | None = None) -> list[ParsedFamily]:
    """Parse text exposition exactly as prometheus_client does, keeping only families `keep` accepts."""
    families = _Families(keep)
    families.feed(text)
    return families.done
