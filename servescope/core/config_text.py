"""`{{ config.<name> }}` placeholders: the alert config's thresholds written into a text (a runbook page).

A page names a threshold instead of copying it, so the number on-call reads is the number the rule uses:
`{{ config.kv_pressure_ratio | percent }}` becomes `70%` with the defaults and `80%` under a config that
says 0.8. They are filled in when the page is loaded, from the deployment's config, before anything else
reads the page; the `{{ labels.<name> }}` placeholders of step parameters are another thing (an alert's
labels, bound when a step runs) and are left exactly as they are.

A name is a field of `AlertsConfig` (or of its `canary` section: `canary.min_requests`) or one of its
derived values (`error_budget`); an unknown name, an unknown format or a `{{ config` that is not a
whole placeholder is an error naming the line, never text left for on-call to puzzle over.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from servescope.core.config import AlertsConfig
from servescope.core.durations import parse_duration
from servescope.core.errors import ServescopeError

PLACEHOLDER = re.compile(r"\{\{\s*config\.([a-z_][a-z0-9_.]*)\s*(?:\|\s*([a-z_]+)\s*)?\}\}")
_OPENING = re.compile(r"\{\{\s*config\b")


class ConfigTextError(ServescopeError, ValueError):
    """A `{{ config... }}` placeholder that names no config value or no format."""

    reason = "config_placeholder_invalid"

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line, self.message = line, message


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple | list):
        return ", ".join(_plain(item) for item in value)
    return str(value)


def _words(value: Any) -> str:
    """A Prometheus duration for a reader: 15m -> 15 minutes, 1h -> 1 hour, 24h -> 1 day."""
    seconds = parse_duration(str(value))
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} second{'s' if seconds != 1 else ''}"


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{value!r} is not a number")
    return float(value)


# The formats a placeholder may ask for: how a number is written for a reader.
FORMATS: dict[str, Callable[[Any], str]] = {
    "": _plain,
    # 0.7 -> 70%, 0.995 -> 99.5%, 0.01 -> 1% (six significant digits drop float noise such as 1.0000000002)
    "percent": lambda value: f"{_number(value) * 100:g}%",
    # bytes -> GiB: 1073741824 -> 1
    "gib": lambda value: f"{_number(value) / 2**30:g}",
    # a number written for a reader: an le bound "60.0" -> 60 (queries keep the bound as it is)
    "number": lambda value: f"{float(value):g}",
    # seconds -> minutes: 3600 -> 60
    "minutes": lambda value: f"{_number(value) / 60:g}",
    # bytes -> MiB: 4194304 -> 4
    "mib": lambda value: f"{_number(value) / 2**20:g}",
    # a duration in words: 15m -> 15 minutes
    "words": _words,
    # what a share leaves: a 20% buffer keeps utilisation under 0.8 (and 80%)
    "complement": lambda value: f"{1 - _number(value):g}",
    "complement_percent": lambda value: f"{(1 - _number(value)) * 100:g}%",
}


def config_value(config: AlertsConfig, name: str) -> Any:
    """The value `name` (dotted for a section: `canary.window`) holds in `config`; KeyError if none."""
    node: Any = config
    for part in name.split("."):
        known = isinstance(node, BaseModel) and (
            part in type(node).model_fields or isinstance(getattr(type(node), part, None), property)
        )
        if not known:
            raise KeyError(name)
        node = getattr(node, part)
    if isinstance(node, BaseModel):
        raise KeyError(name)  # a whole section is not a value
    return node


def render_config(text: str, config: AlertsConfig) -> str:
    """`text` with every `{{ config.<name> [| format] }}` replaced by the value in `config`."""
    out: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        out.append(_render_line(line, number, config))
    return "\n".join(out)


def _render_line(line: str, number: int, config: AlertsConfig) -> str:
    def replace(found: re.Match[str]) -> str:
        name, form = found.group(1), found.group(2) or ""
        try:
            value = config_value(config, name)
        except KeyError:
            message = f"{found.group(0)}: the alerts config has no value {name!r}"
            raise ConfigTextError(number, message) from None
        if form not in FORMATS:
            known = ", ".join(f for f in FORMATS if f)
            raise ConfigTextError(number, f"{found.group(0)}: unknown format {form!r} (formats: {known})")
        try:
            return FORMATS[form](value)
        except TypeError as exc:
            raise ConfigTextError(number, f"{found.group(0)}: {exc}") from None

    rendered = PLACEHOLDER.sub(replace, line)
    if _OPENING.search(rendered):
        raise ConfigTextError(
            number,
            "a `{{ config` that is not a whole `{{ config.<name> }}` or `{{ config.<name> | format }}`",
        )
    return rendered


def placeholders(text: str) -> list[str]:
    """The config names `text` refers to, in order, once each."""
    return list(dict.fromkeys(found.group(1) for found in PLACEHOLDER.finditer(text)))
