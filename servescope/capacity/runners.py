"""Choosing a step runner from the command line: engine flags as `name=value`, and the HTTP runner."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from servescope.load.records import StepRunner

HTTP_RUNNER = "servescope.load.http_runner"


class RunnerUnavailableError(RuntimeError):
    """The runner asked for is not part of this installation."""


def parse_value(text: str) -> object:
    """`8` -> 8, `0.9` -> 0.9, `true`/`false` -> bool, `none` -> None, anything else the text itself."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text.strip()


def parse_flags(pairs: Iterable[str]) -> dict[str, object]:
    """`["max_num_seqs=8", ...]` as a mapping; raises ValueError naming a pair without `=`."""
    flags: dict[str, object] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"engine flag {pair!r}: expected name=value, like max_num_seqs=8")
        flags[name.strip().replace("-", "_")] = parse_value(value)
    return flags


def http_runner(url: str) -> StepRunner:
    """The HTTP load runner against `url`; raises RunnerUnavailableError when this build lacks it."""
    try:
        module = importlib.import_module(HTTP_RUNNER)
    except ModuleNotFoundError as err:
        raise RunnerUnavailableError(
            f"--url needs the HTTP load runner ({HTTP_RUNNER}), which this installation does not have; "
            "use --simulate, or install a servescope that ships `servescope load`"
        ) from err
    runner: StepRunner = module.HttpStepRunner(url)
    return runner
