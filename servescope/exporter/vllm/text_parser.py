"""The exposition parser's former home: it lives in the core now (common/text_parser/), shared by every
source and the runbook service; this name keeps the engines' modules importing it until they move."""

from __future__ import annotations

from servescope.common.text_parser import (
    ExpositionError,
    ExpositionParser,
    ParsedFamily,
    ParsedSample,
    SeriesLimits,
    parse_exposition,
)

__all__ = [
    "ExpositionError",
    "ExpositionParser",
    "ParsedFamily",
    "ParsedSample",
    "SeriesLimits",
    "parse_exposition",
]
