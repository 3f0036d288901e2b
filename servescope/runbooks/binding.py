"""`{{ labels.<name> }}` templates: recognised in step parameters, bound from an alert's labels.

The only templating a runbook has: a parameter value (or an element of a list or mapping value) that is
EXACTLY one `{{ labels.<name> }}`. Anything else that looks like templating (`{{`, `}}`, `{%`, `{#`) is an
error, so nothing can be half-substituted into a string. Bound values are plain strings handed to the
action's typed parameters, which decide whether they are acceptable; they are never evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from servescope.core.errors import ServescopeError

LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_TEMPLATE = re.compile(r"\{\{\s*labels\.([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")
_TEMPLATING = ("{{", "}}", "{%", "%}", "{#", "#}")
_SCALARS = (str, int, float, bool)


class TemplateError(ServescopeError, ValueError):
    """A parameter value with templating other than exactly one `{{ labels.<name> }}`."""

    reason = "template_invalid"


class BindingError(ServescopeError, ValueError):
    """A template names a label the alert does not carry."""

    reason = "label_missing"


@dataclass(frozen=True, slots=True)
class Template:
    """A parameter value taken from the alert label `label`."""

    label: str

    def __str__(self) -> str:
        return f"{{{{ labels.{self.label} }}}}"


def parse_scalar(value: Any, where: str) -> Any:
    """A literal scalar as is, a whole-value template as a Template; anything else is a TemplateError."""
    if value is None or isinstance(value, _SCALARS):
        if not isinstance(value, str) or not any(mark in value for mark in _TEMPLATING):
            return value
        found = _TEMPLATE.fullmatch(value)
        if found is None:
            raise TemplateError(
                f"{where}: {value[:80]!r}: the only templating allowed is a whole value "
                '"{{ labels.<name> }}" (nothing before or after it, no filters, no expressions)'
            )
        return Template(found.group(1))
    raise TemplateError(f"{where}: expected a string, number or boolean, got {type(value).__name__}")


def parse_value(value: Any, where: str) -> Any:
    """A parameter value: a scalar or template, or a list / mapping (string keys) of them, one level deep."""
    if isinstance(value, list):
        return [parse_scalar(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        parsed: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(key, dict | list) or (isinstance(key, str) and "{" in key):
                raise TemplateError(
                    f"{where}: a mapping key is a template or a mapping; quote templates: "
                    '"{{ labels.<name> }}", and keep keys literal'
                )
            if not isinstance(key, str):
                raise TemplateError(f"{where}: mapping keys must be strings, got {key!r}")
            parsed[key] = parse_scalar(item, f"{where}.{key}")
        return parsed
    return parse_scalar(value, where)


def templates_in(value: Any) -> list[Template]:
    """The templates a parsed value holds."""
    if isinstance(value, Template):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, Template)]
    if isinstance(value, dict):
        return [item for item in value.values() if isinstance(item, Template)]
    return []


def _bind_one(value: Any, labels: Mapping[str, str], where: str) -> Any:
    if not isinstance(value, Template):
        return value
    if value.label not in labels:
        given = ", ".join(sorted(labels)) or "none"
        raise BindingError(
            f"{where} takes the alert label '{value.label}', which was not given "
            f"(--label {value.label}=...; labels given: {given})"
        )
    return labels[value.label]


def bind(params: Mapping[str, Any], labels: Mapping[str, str], where: str) -> dict[str, Any]:
    """Parameters with every template replaced by its label's value (a string, never interpreted)."""
    bound: dict[str, Any] = {}
    for name, value in params.items():
        at = f"{where}: parameter '{name}'"
        if isinstance(value, list):
            bound[name] = [_bind_one(item, labels, at) for item in value]
        elif isinstance(value, dict):
            bound[name] = {key: _bind_one(item, labels, at) for key, item in value.items()}
        else:
            bound[name] = _bind_one(value, labels, at)
    return bound


def render(value: Any) -> str:
    """A parsed (possibly templated) parameter value for display."""
    if isinstance(value, Template):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(render(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {render(item)}" for key, item in value.items()) + "}"
    return repr(value) if isinstance(value, str) else str(value)
