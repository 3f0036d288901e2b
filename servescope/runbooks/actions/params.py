"""The typed parameters of actions: each a whitelist, because their values may come from alert labels.

Parameter types validate values that may come from an alert's labels, i.e. from anyone able to put a
label on a series. Each one is a whitelist (ASCII patterns matched in full, bounded lengths) or, for the
free-text ones (label values, comments), a bounded string that is only ever passed on as data: escaped
into a PromQL string literal, or encoded into JSON.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator


class LiteralOnly:
    """Marks a parameter that a runbook must give literally: never bound from an alert label."""

    def __repr__(self) -> str:
        return "LiteralOnly()"


def _string(value: Any, what: str, max_length: int, *, ints: bool = False) -> str:
    if ints and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"expected {what}, got {type(value).__name__}")
    if len(value) > max_length:
        raise ValueError(f"expected {what}: {len(value)} characters is over the limit of {max_length}")
    if "\x00" in value:
        raise ValueError(f"expected {what}: contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"expected {what}: not valid UTF-8 text") from None
    return value


def _matching(pattern: re.Pattern[str], what: str, max_length: int, *, ints: bool = False) -> Any:
    def check(value: Any) -> str:
        text = _string(value, what, max_length, ints=ints)
        if pattern.fullmatch(text) is None:
            raise ValueError(f"expected {what}, got {text[:60]!r}")
        return text

    return PlainValidator(check, json_schema_input_type=str)


_GPU_REF = re.compile(r"[0-9]{1,4}|GPU-[0-9a-fA-F]{1,8}(?:-[0-9a-fA-F]{1,12}){0,6}", re.ASCII)
_K8S_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*", re.ASCII)
# Ports, paths and queries of ordinary endpoints; no quotes, parentheses, `$`, `;`, backticks or spaces.
_HTTP_URL = re.compile(r"https?://[A-Za-z0-9.\-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~%/?#=&+,:@\-]*)?", re.ASCII)
# A Kubernetes label value (what a label selector may ask for): 63 characters, alphanumeric at both ends.
_K8S_LABEL_VALUE = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+\-]*", re.ASCII)
_WINDOW = re.compile(r"([0-9]{1,7})([smhd])", re.ASCII)
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*", re.ASCII)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_WINDOW_SECONDS = 30 * 86400


def _window(value: Any) -> str:
    text = _string(value, "a duration such as 90s, 30m, 1h or 2d", 16)
    found = _WINDOW.fullmatch(text)
    if found is None:
        raise ValueError(f"expected a duration such as 90s, 30m, 1h or 2d, got {text[:40]!r}")
    seconds = int(found.group(1)) * _UNITS[found.group(2)]
    if not 1 <= seconds <= MAX_WINDOW_SECONDS:
        raise ValueError(f"expected a duration between 1s and 30d, got {text!r}")
    return text


def _index(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected a GPU index (0-1023), got a boolean")
    if isinstance(value, str):
        if re.fullmatch(r"[0-9]{1,4}", value, re.ASCII) is None:
            raise ValueError(f"expected a GPU index (0-1023), got {value[:60]!r}")
        value = int(value)
    if not isinstance(value, int) or not 0 <= value <= 1023:
        raise ValueError(f"expected a GPU index (0-1023), got {value!r}")
    return value


def window_seconds(window: str) -> int:
    found = _WINDOW.fullmatch(window)
    assert found is not None  # validated by Window
    return int(found.group(1)) * _UNITS[found.group(2)]


GpuRef = Annotated[
    str,
    _matching(_GPU_REF, "a GPU: its NVML index (digits) or UUID (GPU- then hex and dashes)", 80, ints=True),
]
GpuIndex = Annotated[int, PlainValidator(_index, json_schema_input_type=int)]
Window = Annotated[str, PlainValidator(_window, json_schema_input_type=str)]
K8sName = Annotated[
    str,
    _matching(_K8S_NAME, "a Kubernetes name (lowercase letters, digits, '-' and '.', 253 at most)", 253),
]
K8sLabelValue = Annotated[
    str,
    _matching(
        _K8S_LABEL_VALUE,
        "a Kubernetes label value (letters, digits, '-', '_' and '.', alphanumeric at both ends, 63 at most)",
        63,
    ),
]
HttpUrl = Annotated[str, _matching(_HTTP_URL, "an http:// or https:// URL", 2048)]
ModelName = Annotated[
    str, _matching(_MODEL_NAME, "a model name (letters, digits and . _ / : @ + -, 256 at most)", 256)
]
LabelName = Annotated[str, _matching(_LABEL_NAME, "a label name ([a-zA-Z_][a-zA-Z0-9_]*)", 128)]
LabelValue = Annotated[
    str, PlainValidator(lambda v: _string(v, "a label value (1024 characters at most)", 1024, ints=True))
]
Comment = Annotated[
    str,
    PlainValidator(lambda v: _string(v, "a comment (1000 characters at most)", 1000)),
    Field(min_length=1),
]


class Params(BaseModel):
    """Base of every action's parameters: unknown fields are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NoParams(Params):
    pass
