"""The exposition parser's former home: it lives in the core now (common/text_parser/), shared by every
source and the runbook service; this name keeps the engines' modules importing it until they move."""

from __future__ import annotations

# Re-exported under their own names: explicit re-exports, as mypy's strict mode wants them.
from servescope.common.text_parser import ExpositionError as ExpositionError
from servescope.common.text_parser import ExpositionParser as ExpositionParser
from servescope.common.text_parser import ParsedFamily as ParsedFamily
from servescope.common.text_parser import ParsedSample as ParsedSample
from servescope.common.text_parser import SeriesLimits as SeriesLimits
from servescope.common.text_parser import parse_exposition as parse_exposition
