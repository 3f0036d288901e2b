"""What one scraped server may make the parser hold: series, label-value length, label values per family.

A server's page is untrusted. Without these bounds a page of fresh label values every scrape (a LoRA
name per request, a request id leaked into a label) makes the exporter's memory follow the engine's
whims, and every series it parses it also re-exports. The checks run while parsing, before a sample is
kept, and each refused sample is counted by reason, so the exporter says what it dropped:

- `label_value_length`: a label value longer than `max_label_value_length` (or more than
  `MAX_LABELS` labels on one series); checked once per distinct series text, when the parser learns it;
- `series_limit`: the page holds more than `max_series` samples of the families kept;
- `label_values_limit`: a family whose label takes more than `max_label_values` distinct values; its
  samples past that are dropped in page order, so the first values (the engine's own) stay.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from servescope.core.errors import ServescopeError
from servescope.core.exposition.model import ParsedFamily, ParsedSample

# Far more than any engine's series carry: vLLM's cache_config_info has 37, its other series 2-4.
MAX_LABELS = 128


@dataclass(frozen=True, slots=True)
class SeriesLimits:
    """Bounds on one server's page. The defaults hold 16 data-parallel engines' pages with room to spare
    (vLLM 0.32 exports about 600 series per engine) and keep eight hostile servers within the DaemonSet's
    memory limit (bench/memory.py)."""

    max_series: int = 10_000
    max_label_value_length: int = 512
    max_label_values: int = 256


class LabelsRefusedError(ServescopeError, ValueError):
    """A series whose labels break a limit; `reason` is what is counted."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def check_labels(labels: Mapping[str, str], text_length: int, limits: SeriesLimits) -> None:
    """Refuse a series with a label value over the length limit, or too many labels.

    `text_length` is the length of the label set as written: no value can be longer than that, so the
    usual short series is accepted without looking at each value.
    """
    if len(labels) > MAX_LABELS:
        raise LabelsRefusedError("label_value_length")
    if text_length > limits.max_label_value_length and any(
        len(value) > limits.max_label_value_length for value in labels.values()
    ):
        raise LabelsRefusedError("label_value_length")


def limit_label_values(families: list[ParsedFamily], most: int, dropped: Counter[str]) -> list[ParsedFamily]:
    """The families with the samples past `most` distinct values of one label (per family name) removed.

    Only a name with more than `most` samples can break the limit, and only a name one of whose labels
    does is filtered sample by sample: an ordinary page costs a count per family and a set per label.
    """
    by_name: dict[str, list[ParsedFamily]] = {}
    for family in families:
        by_name.setdefault(family.name, []).append(family)
    over = False
    for group in by_name.values():
        samples = [sample for family in group for sample in family.samples]
        if len(samples) > most and _crowded(samples, most):
            over = True
            _drop_past(group, most, dropped)
    return [family for family in families if family.samples] if over else families


def _crowded(samples: list[ParsedSample], most: int) -> bool:
    keys = {key for sample in samples for key in sample.labels}
    return any(len({sample.labels.get(key) for sample in samples}) > most for key in keys)


def _drop_past(group: list[ParsedFamily], most: int, dropped: Counter[str]) -> None:
    """Keep, in page order, the samples whose every label value is among the first `most` of its label."""
    seen: dict[str, set[str]] = {}
    for family in group:
        kept = []
        for sample in family.samples:
            known = [seen.setdefault(key, set()) for key in sample.labels]
            values = list(sample.labels.values())
            if all(value in held or len(held) < most for held, value in zip(known, values, strict=True)):
                for held, value in zip(known, values, strict=True):
                    held.add(value)
                kept.append(sample)
            else:
                dropped["label_values_limit"] += 1
        family.samples = kept
