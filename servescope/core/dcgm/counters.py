"""The counters file: which DCGM fields to watch and how each becomes a servescope metric."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from servescope.core.catalog.spec import GPU_LABELS, Kind, MetricSpec
from servescope.core.errors import ServescopeError

DEFAULT_COUNTERS = "default-counters.csv"

# unit as dmon prints it -> factor to the exported base unit
UNIT_SCALE: dict[str, float] = {
    "count": 1.0,
    "ratio": 1.0,
    "percent": 0.01,
    "bytes_per_second": 1.0,
    "megabytes_per_second": 1e6,
    "mib": 1024.0 * 1024.0,
    "mhz": 1e6,
    "celsius": 1.0,
    "watts": 1.0,
    "millijoules": 1e-3,
    "nanoseconds": 1e-9,
    "xid": 1.0,
    "bool": 1.0,
}


class CountersError(ServescopeError, ValueError):
    """A line of the counters file is wrong; the message names the file and the line."""

    reason = "counters_invalid"


@dataclass(frozen=True, slots=True)
class CounterField:
    field_id: int
    spec: MetricSpec
    scale: float
    link: str | None
    fallback_for: int | None
    line_no: int


def _options(text: str, where: str) -> dict[str, int]:
    if text in ("-", ""):
        return {}
    found: dict[str, int] = {}
    for item in text.split(";"):
        key, sep, value = item.strip().partition("=")
        if not sep or key not in ("link", "fallback_for") or not value.strip().isdigit():
            raise CountersError(f"{where}: bad option {item.strip()!r} (expected link=N or fallback_for=ID)")
        found[key] = int(value)
    return found


def _parse_line(line: str, where: str) -> tuple[int, MetricSpec, float, dict[str, int]]:
    parts = [p.strip() for p in line.split(",", 5)]
    if len(parts) != 6:
        raise CountersError(
            f"{where}: expected 6 comma-separated columns "
            f"(field_id, metric, type, unit, options, help), got {len(parts)}"
        )
    raw_id, metric, kind_text, unit, options_text, help_text = parts
    if not raw_id.isdigit():
        raise CountersError(f"{where}: field id {raw_id!r} is not a number")
    if kind_text not in ("counter", "gauge"):
        raise CountersError(f"{where}: type {kind_text!r} must be counter or gauge")
    if unit not in UNIT_SCALE:
        raise CountersError(f"{where}: unknown unit {unit!r}; known: {', '.join(UNIT_SCALE)}")
    if not help_text:
        raise CountersError(f"{where}: help text is empty")
    options = _options(options_text, where)
    labels = (*GPU_LABELS, "link") if "link" in options else GPU_LABELS
    try:
        spec = MetricSpec(metric, Kind(kind_text), help_text, labels, "dcgm")
    except ValueError as exc:
        raise CountersError(f"{where}: {exc}") from None
    return int(raw_id), spec, UNIT_SCALE[unit], options


def parse_counters(text: str, source: str = "counters file") -> list[CounterField]:
    """Parse and check every line; the first bad line raises CountersError naming it."""
    fields: list[CounterField] = []
    specs: dict[str, MetricSpec] = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{source} line {line_no}"
        field_id, spec, scale, options = _parse_line(stripped, where)
        if any(f.field_id == field_id for f in fields):
            raise CountersError(f"{where}: field {field_id} is listed twice")
        previous = specs.setdefault(spec.name, spec)
        if (previous.kind, previous.labels) != (spec.kind, spec.labels):
            raise CountersError(f"{where}: metric {spec.name} is declared again with another type or labels")
        link = str(options["link"]) if "link" in options else None
        fields.append(CounterField(field_id, previous, scale, link, options.get("fallback_for"), line_no))
    ids = {f.field_id for f in fields}
    for f in fields:
        if f.fallback_for is not None and f.fallback_for not in ids:
            raise CountersError(
                f"{source} line {f.line_no}: fallback_for={f.fallback_for} names a field "
                "that is not in the file"
            )
    if not fields:
        raise CountersError(f"{source}: no fields")
    return fields


def load_counters(path: str | Path | None = None) -> list[CounterField]:
    """The counters file at `path`, or the default one shipped with servescope."""
    if path is None or str(path) == "":
        text = resources.files(__package__).joinpath(DEFAULT_COUNTERS).read_text()
        return parse_counters(text, DEFAULT_COUNTERS)
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise CountersError(f"cannot read counters file {file}: {exc.strerror}") from None
    return parse_counters(text, str(file))


def default_counters_text() -> str:
    return resources.files(__package__).joinpath(DEFAULT_COUNTERS).read_text()


def specs_of(fields: list[CounterField]) -> list[MetricSpec]:
    """The distinct metric specs, in file order (for the catalog and the README)."""
    unique: dict[str, MetricSpec] = {}
    for f in fields:
        unique.setdefault(f.spec.name, f.spec)
    return list(unique.values())
