"""The slow path: prometheus_client 0.26's parser rule by rule, quirks included, for the rare line the
fast path does not take (with its default, non-legacy name validation), so that both always agree."""

from __future__ import annotations

import re

from servescope.core.exposition.model import ExpositionError

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
PLAIN_NAME = re.compile(_NAME)
# `$` rather than `\Z` because prometheus_client's check accepts a trailing newline (from an escaped `\n`).
_LEGACY_NAME = re.compile(_NAME + "$")
_RESERVED_LABEL = re.compile("__.*$")
_LABEL_ESCAPE = re.compile(r'\\[\\n"]')
HELP_ESCAPE = re.compile(r"\\[\\n]")
_UNESCAPED = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
ASCII_SPACE = " \t\n\r\x0b\x0c"
TYPES = {"counter", "gauge", "summary", "histogram", "gaugehistogram", "unknown", "info", "stateset"}
_Row = tuple[str, dict[str, str], float]


def unescape(pattern: re.Pattern[str], text: str) -> str:
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
    return unescape(_LABEL_ESCAPE, text), quoted


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
        labels[name] = unescape(_LABEL_ESCAPE, term[1:-1])
    return labels


def slow_sample(line: str) -> _Row:
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


def _comment_parts(line: str) -> list[str]:
    """A comment's first three tokens and the rest, split as prometheus_client does (quotes group)."""
    parts: list[str] = []
    pos = 0
    while pos < len(line):
        if line[pos] in ASCII_SPACE:
            pos += 1
        elif len(parts) == 3:
            parts.append(line[pos:])
            break
        else:
            stop = _unquoted_find(line, ASCII_SPACE, pos)
            parts.append(line[pos:] if stop == -1 else line[pos:stop])
            pos = len(line) if stop == -1 else stop + 1
    return parts


def slow_directive(line: str) -> tuple[str, str, str | None] | None:
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


def family_name(name: str, typ: str) -> str:
    return name[:-6] if typ == "counter" and name.endswith("_total") else name


def check_family(lineno: int, name: str, typ: str) -> None:
    """What prometheus_client's `Metric` refuses when it builds a family."""
    if not name:
        raise ExpositionError(f"line {lineno}: empty metric family name")
    if not name.isascii():
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise ExpositionError(f"line {lineno}: metric name {name!r} is not valid UTF-8") from None
    if typ not in TYPES:
        raise ExpositionError(f"line {lineno}: invalid metric type {typ!r}")
