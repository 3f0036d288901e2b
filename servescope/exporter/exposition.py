"""Prometheus text exposition (format 0.0.4): samples in, lines out.

Rendering happens in source threads when a collection finishes; a scrape only copies bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from servescope.core.catalog.spec import OPTIONAL_LABELS, MetricSpec

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True, slots=True)
class Sample:
    """One value of one series: label values are given in the spec's label order.

    Histogram samples name their suffix (_bucket, _sum, _count); a _bucket's last label value is `le`.
    """

    spec: MetricSpec
    label_values: tuple[str, ...]
    value: float
    suffix: str = ""


def escape_label_value(value: str) -> str:
    """Escape a label value as the text format requires (backslash, double quote, newline)."""
    if "\\" in value or '"' in value or "\n" in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """Render a float the way Prometheus parses it; integers stay short and exact."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if (isinstance(value, int) or value.is_integer()) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def family_header(spec: MetricSpec) -> str:
    return f"# HELP {spec.name} {escape_help(spec.help)}\n# TYPE {spec.name} {spec.kind.value}\n"


class SeriesRenderer:
    """Renders samples to lines, caching each series' `name{labels}` prefix.

    Label sets are stable from one cycle to the next, so the cache turns rendering into one
    dictionary lookup and one number format per sample. It is cleared when it grows past `limit`
    so that churning labels (PIDs) cannot grow it without bound.
    """

    def __init__(self, limit: int = 200_000) -> None:
        self._prefixes: dict[tuple[str, str, tuple[str, ...]], str] = {}
        self._limit = limit

    def _prefix(self, spec: MetricSpec, label_values: tuple[str, ...], suffix: str = "") -> str:
        key = (spec.name, suffix, label_values)
        prefix = self._prefixes.get(key)
        if prefix is None:
            names = (*spec.labels, "le") if suffix == "_bucket" else spec.labels
            if len(label_values) != len(names):
                raise ValueError(f"{spec.name}: {len(label_values)} label values for labels {names}")
            if names:
                pairs = ",".join(
                    f'{name}="{escape_label_value(value)}"'
                    for name, value in zip(names, label_values, strict=True)
                    if value or name not in OPTIONAL_LABELS  # the workload's labels only when known
                )
                prefix = f"{spec.name}{suffix}{{{pairs}}} "
            else:
                prefix = f"{spec.name}{suffix} "
            if len(self._prefixes) >= self._limit:
                self._prefixes.clear()
            self._prefixes[key] = prefix
        return prefix

    def render(self, samples: Iterable[Sample]) -> dict[str, list[str]]:
        """Group samples by family name; each line ends with a newline."""
        families: dict[str, list[str]] = {}
        for sample in samples:
            line = (
                self._prefix(sample.spec, sample.label_values, sample.suffix)
                + format_value(sample.value)
                + "\n"
            )
            lines = families.get(sample.spec.name)
            if lines is None:
                families[sample.spec.name] = [line]
            else:
                lines.append(line)
        return families
