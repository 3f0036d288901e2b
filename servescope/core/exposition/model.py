"""What the exposition parser returns: samples and families, and the error naming a bad line."""

from __future__ import annotations

from dataclasses import dataclass

from servescope.core.errors import ServescopeError


@dataclass(frozen=True, slots=True)
class ParsedSample:
    """One sample: metric name, labels and value (a timestamp after the value is checked, not kept)."""

    name: str
    labels: dict[str, str]
    value: float


@dataclass(slots=True)
class ParsedFamily:
    """One metric family; `type` is prometheus_client's string ("unknown" where the text says untyped)."""

    name: str
    type: str
    documentation: str
    samples: list[ParsedSample]


class ExpositionError(ServescopeError, ValueError):
    """Input that is not valid text exposition; message starts with `line N: `."""

    reason = "exposition_invalid"


# The frozen dataclass's own __init__ (three object.__setattr__ calls) costs a third of a line's budget;
# filling the slots directly builds the very same object twice as fast.
new_sample = object.__new__
set_sample_name = ParsedSample.__dict__["name"].__set__
set_sample_labels = ParsedSample.__dict__["labels"].__set__
set_sample_value = ParsedSample.__dict__["value"].__set__


def make_sample(name: str, labels: dict[str, str], value: float) -> ParsedSample:
    """A ParsedSample built without the dataclass's __init__ (see above)."""
    sample: ParsedSample = new_sample(ParsedSample)
    set_sample_name(sample, name)
    set_sample_labels(sample, labels)
    set_sample_value(sample, value)
    return sample
