"""servescope's own errors: the one base (a message for people, a reason for programs), and one line
for a pydantic ValidationError, naming what the user typed (a flag, a field, a path)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol


class ServescopeError(Exception):
    """The base of every error servescope raises on purpose: its message says what happened and what to
    check; `reason` is a short snake_case word for what programs read (a metric label, a log field, a
    JSON answer). A class names its usual reason; an instance may carry its own (`reason=`)."""

    reason: str = "error"

    def __init__(self, *args: object, reason: str | None = None) -> None:
        super().__init__(*args)
        if reason is not None:
            self.reason = reason


class Errors(Protocol):
    """A pydantic ValidationError, or what carries its errors (FastAPI's RequestValidationError)."""

    def errors(self) -> Sequence[Any]: ...


def _location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "value"


def first_reason(exc: Errors) -> str:
    """The first error's message, without pydantic's `Value error, ` prefix."""
    errors = exc.errors()
    return str(errors[0]["msg"]).removeprefix("Value error, ") if errors else "invalid value"


def validation_message(
    exc: Errors, name_of: Callable[[tuple[int | str, ...]], str] = _location, *, prefix: str = ""
) -> str:
    """`invalid value for <name>: <reason>` for the first error, where `name_of` turns the error's
    location into what the user knows (a flag such as --nvml-interval, a JSON path, a label name)."""
    errors = exc.errors()
    if not errors:
        return f"{prefix}invalid value"
    first = errors[0]
    reason = first_reason(exc)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{prefix}invalid value for {name_of(tuple(first['loc']))}: {reason}{more}"
