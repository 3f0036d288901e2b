"""`dcgmi dmon` output: a pure, line-at-a-time parser, and the renderer the fake dcgmi uses.

Handles every layout seen in DCGM's history: 2.3 and older (right-aligned, `# Entity`/`Id`),
2.4-3.3 (left-aligned, entity column 10), 4.0-4.4 (11) and 4.5+ (16). Rows are read by entity
prefix and whitespace, not by column offsets, so widths never matter: entity names contain single
spaces ("GPU 0 LINK 3"), values never contain any.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum

NA = "N/A"


class CellStatus(StrEnum):
    OK = "ok"
    NA = "na"  # the field has no value (yet, or on this GPU)
    TRUNCATED = "truncated"  # wider than its column, cut and ended with "...": not a number
    INVALID = "invalid"  # not a number at all


@dataclass(frozen=True, slots=True)
class Cell:
    raw: str
    value: float | None
    status: CellStatus


@dataclass(frozen=True, slots=True)
class Header:
    columns: tuple[str, ...]
    line_no: int


@dataclass(frozen=True, slots=True)
class Row:
    entity: str  # GPU, GPU-I, GPU-CI, Switch, CPU, CPU Core, ...
    entity_id: str
    link: str | None  # for "GPU n LINK m" rows
    raw: tuple[str, ...]
    values: tuple[float | None, ...]  # None: N/A, truncated or not a number (see `cells` for which)
    header: Header
    line_no: int

    @property
    def cells(self) -> tuple[Cell, ...]:
        """Each value with its status; built on demand (the hot path reads `values`)."""
        return tuple(parse_cell(raw) for raw in self.raw)


class ErrorKind(StrEnum):
    HOST_ENGINE_UNREACHABLE = "host_engine_unreachable"
    INVALID_FIELD = "invalid_field"
    WATCH_NOT_SUPPORTED = "watch_not_supported"
    MODULE_NOT_LOADED = "module_not_loaded"
    PERMISSION = "permission"
    VALUES_ERROR = "values_error"
    NO_DATA = "no_data"
    OTHER = "dcgmi_error"


@dataclass(frozen=True, slots=True)
class ErrorLine:
    kind: ErrorKind
    text: str
    line_no: int
    field_id: int | None = None  # for INVALID_FIELD, when the message names it


@dataclass(frozen=True, slots=True)
class Unparseable:
    text: str
    reason: str
    line_no: int


Event = Header | Row | ErrorLine | Unparseable

_HEADER = re.compile(r"^\s*#\s?Entity\b(.*)$")
_UNITS = re.compile(r"^\s*I[Dd]\b")
_ENTITY = re.compile(
    r"^\s*(GPU-CI|GPU-I|GPU|Switch|SW|CPU Core|CPU|Link|NvSwitch)\s+(\d+)(?:\s+LINK\s+(\d+))?\s"
)
_INVALID_FIELD_ID = re.compile(r"invalid field ID\.?\s*'?(-?\d+)'?", re.IGNORECASE)
_ERROR_PATTERNS: tuple[tuple[re.Pattern[str], ErrorKind], ...] = (
    (
        re.compile(
            r"unable to establish a connection|Unable to connect to host engine|"
            r"connection invalid/disconnected",
            re.IGNORECASE,
        ),
        ErrorKind.HOST_ENGINE_UNREACHABLE,
    ),
    (re.compile(r"invalid field ID|Expected numerical fieldId", re.IGNORECASE), ErrorKind.INVALID_FIELD),
    (
        re.compile(r"module of DCGM that is not currently loaded|Result: -33\b", re.IGNORECASE),
        ErrorKind.MODULE_NOT_LOADED,
    ),
    (re.compile(r"as root|permission|Result: -4\b", re.IGNORECASE), ErrorKind.PERMISSION),
    (re.compile(r"Error setting watches", re.IGNORECASE), ErrorKind.WATCH_NOT_SUPPORTED),
    (re.compile(r"Error getting values", re.IGNORECASE), ErrorKind.VALUES_ERROR),
    (re.compile(r"No data returned from the hostengine", re.IGNORECASE), ErrorKind.NO_DATA),
)


def parse_cell(raw: str) -> Cell:
    if raw == NA:
        return Cell(raw, None, CellStatus.NA)
    if raw.endswith("..."):
        return Cell(raw, None, CellStatus.TRUNCATED)
    value = number(raw)
    return Cell(raw, None, CellStatus.INVALID) if value is None else Cell(raw, value, CellStatus.OK)


def number(raw: str) -> float | None:
    """The hot path of parse_cell: a finite number, or None for N/A, `12...` and anything else."""
    if raw == NA:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if value - value == 0 else None  # rejects nan and inf, which dmon never prints


def classify_error(text: str, line_no: int) -> ErrorLine | None:
    """An error message of dcgmi (stdout or stderr), or None when the line is not one."""
    if "Error" not in text and "No data returned" not in text:
        return None
    for pattern, kind in _ERROR_PATTERNS:
        if pattern.search(text):
            field = _INVALID_FIELD_ID.search(text) if kind is ErrorKind.INVALID_FIELD else None
            return ErrorLine(kind, text.strip(), line_no, int(field.group(1)) if field else None)
    return ErrorLine(ErrorKind.OTHER, text.strip(), line_no)


class DmonParser:
    """Feed lines in order; each yields at most one event. Keeps the current header between rows."""

    def __init__(self) -> None:
        self.header: Header | None = None
        self.line_no = 0

    def feed(self, line: str) -> Event | None:
        self.line_no += 1
        n = self.line_no
        text = line.rstrip("\r\n")
        if not text.strip():
            return None
        entity = _ENTITY.match(text + " ")
        if entity is not None:
            return self._row(entity, text, n)
        header = _HEADER.match(text)
        if header is not None:
            self.header = Header(tuple(header.group(1).split()), n)
            return self.header
        if _UNITS.match(text) or text.lstrip().startswith("#"):
            return None  # the units line, and comments in captured files
        error = classify_error(text, n)
        if error is not None:
            return error
        return Unparseable(text, "not dcgmi dmon output", n)

    def _row(self, entity: re.Match[str], text: str, n: int) -> Row | Unparseable:
        if self.header is None:
            return Unparseable(text, "row before any #Entity header", n)
        raw = text[entity.end() - 1 :].split()
        if len(raw) != len(self.header.columns):
            return Unparseable(text, f"expected {len(self.header.columns)} values, got {len(raw)}", n)
        values = tuple([number(value) for value in raw])
        return Row(entity.group(1), entity.group(2), entity.group(3), tuple(raw), values, self.header, n)


def parse_dmon(lines: Iterable[str]) -> Iterator[Event]:
    parser = DmonParser()
    for line in lines:
        event = parser.feed(line)
        if event is not None:
            yield event


# --- rendering (the fake dcgmi, property tests) -------------------------------------------------
@dataclass(frozen=True, slots=True)
class Layout:
    name: str
    entity_title: str
    id_title: str
    entity_width: int
    right_aligned: bool
    blank_before_repeat: bool


LAYOUTS: dict[str, Layout] = {
    "2.3": Layout("2.3", "# Entity", "Id", 8, right_aligned=True, blank_before_repeat=True),
    "3.3": Layout("3.3", "#Entity", "ID", 10, right_aligned=False, blank_before_repeat=False),
    "4.4": Layout("4.4", "#Entity", "ID", 11, right_aligned=False, blank_before_repeat=False),
    "4.5": Layout("4.5", "#Entity", "ID", 16, right_aligned=False, blank_before_repeat=False),
}
HEADER_EVERY = 14  # dmon repeats its two header lines every 14 iterations


@dataclass(frozen=True, slots=True)
class Column:
    short: str
    width: int  # the field's display width; its column is width + 8 characters
    unit: str = ""


def _pad(text: str, width: int, right: bool) -> str:
    return text.rjust(width) if right else text.ljust(width)


def fit(value: str, width: int) -> str:
    """A value wider than its field is cut and ends in '...', as dmon prints it."""
    return value if len(value) <= width else value[: max(width - 3, 0)] + "..."


def render_header(layout: Layout, columns: Sequence[Column]) -> list[str]:
    right = layout.right_aligned
    title = _pad(layout.entity_title, layout.entity_width, right)
    units = _pad(layout.id_title, layout.entity_width, right)
    title += "".join(_pad(c.short, c.width + 8, right) for c in columns)
    units += "".join(_pad(c.unit, c.width + 8, right) for c in columns)
    return [title, units]


def render_row(layout: Layout, entity: str, columns: Sequence[Column], values: Sequence[str]) -> str:
    right = layout.right_aligned
    line = _pad(entity, layout.entity_width, right)
    if not right and len(entity) >= layout.entity_width:
        line = entity + " "  # never glue an over-long entity name to its first value
    return line + "".join(
        _pad(fit(v, c.width), c.width + 8, right) for c, v in zip(columns, values, strict=True)
    )
