"""How much of an alert and of a step's output the incident store keeps: bounded, with a visible mark.

Labels and annotations come from scraped data and webhook bodies: a 1 MB label value must not be
stored, nor served to every reader of /incidents. Values past their cap are cut and end with
`...[truncated: N characters]`; labels past the count are dropped and the mapping says how many under
the key `_truncated`. A step's output and data are bounded the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

MAX_LABELS = 64
MAX_LABEL_VALUE = 1024
MAX_ANNOTATIONS = 32
MAX_ANNOTATION_VALUE = 8192
MAX_OUTPUT = 64 * 1024
MAX_DATA = 256 * 1024
MARK = "...[truncated: {} characters]"
TRUNCATED_KEY = "_truncated"


def capped_text(text: str, limit: int) -> str:
    """`text`, or its first `limit` characters and the mark."""
    return text if len(text) <= limit else text[:limit] + MARK.format(len(text))


def capped_map(mapping: Mapping[str, Any], max_items: int, max_value: int) -> dict[str, str]:
    """The first `max_items` entries, names and values capped; `_truncated` says how many were dropped."""
    items = list(mapping.items())
    kept = {capped_text(str(k), 128): capped_text(str(v), max_value) for k, v in items[:max_items]}
    if len(items) > max_items:
        kept[TRUNCATED_KEY] = f"{len(items) - max_items} more not kept"
    return kept


def cap_labels(mapping: Mapping[str, Any]) -> dict[str, str]:
    return capped_map(mapping, MAX_LABELS, MAX_LABEL_VALUE)


def cap_annotations(mapping: Mapping[str, Any]) -> dict[str, str]:
    return capped_map(mapping, MAX_ANNOTATIONS, MAX_ANNOTATION_VALUE)


def data_json(data: Mapping[str, Any]) -> str:
    """A step's data as stored: its JSON, or when over MAX_DATA a note of its size instead."""
    text = json.dumps(dict(data), ensure_ascii=False, sort_keys=True, default=str)
    if len(text) <= MAX_DATA:
        return text
    return json.dumps({TRUNCATED_KEY: f"the step's data was {len(text)} characters: not kept"})
