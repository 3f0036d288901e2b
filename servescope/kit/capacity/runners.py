"""Choosing a step runner from the command line: engine flags as `name=value`, and the HTTP runner."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, cast

from servescope.core.extensions import simulator
from servescope.kit.load.endpoint import EndpointStepRunner
from servescope.kit.load.records import LoopMode, StepRunner


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


def http_runner(url: str, mode: LoopMode = "open") -> StepRunner:
    """The HTTP load runner against `url` (its model read from /v1/models at the first step)."""
    return EndpointStepRunner(url, mode)


def checked_http_runner(url: str, mode: LoopMode = "open") -> StepRunner:
    """`http_runner`, having reached the engine once; raises ValueError naming the URL otherwise."""
    runner = EndpointStepRunner(url, mode)
    runner.check()
    return runner


class SimulatedEngine(Protocol):
    """servescope-sim's `engine` hook: boots the simulated engine with these flags and measures it in
    process; raises a ServescopeError when the flags do not let it start (as vLLM exits at start)."""

    def __call__(
        self, params: Mapping[str, object], *, mode: LoopMode = "open", warmup_s: float = 5.0
    ) -> StepRunner: ...


def simulated_engine(what: str) -> SimulatedEngine:
    """The simulated engine (servescope-sim, loaded only now); `what` names the option that asked for it
    in the MissingDistributionError raised when servescope-sim is not installed."""
    return cast(SimulatedEngine, simulator("engine", what))
