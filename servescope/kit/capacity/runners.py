"""Choosing a step runner from the command line: engine flags as `name=value`, the HTTP runner with its
validity rules and calibrated ceiling, and the Locust runner that measures a client-bound step again."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast

from servescope.core.extensions import simulator
from servescope.kit.capacity.steps import Slo
from servescope.kit.load.client import Api
from servescope.kit.load.endpoint import EndpointStepRunner
from servescope.kit.load.engine_metrics import metrics_url
from servescope.kit.load.records import LoopMode, StepRunner
from servescope.kit.load.runner import ShapeSource
from servescope.kit.load.scaleout import LocustPlan, LocustStepRunner
from servescope.kit.load.validity import ValidityRules
from servescope.kit.load.workload import Workload

LAG_SHARE_OF_SLO = 0.1  # the default schedule-lag bound: a tenth of the tightest SLO bound


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


def lag_bound(slos: Sequence[Slo], given: float = 0.0) -> float:
    """The schedule-lag bound: as given, or a tenth of the tightest SLO bound."""
    return given if given > 0 else LAG_SHARE_OF_SLO * min(slo.limit_s for slo in slos)


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """How the HTTP runner sends and judges its steps."""

    mode: LoopMode = "open"
    workload: ShapeSource = field(default_factory=Workload)
    api: Api = "completions"
    warmup_s: float = 0.0
    rules: ValidityRules = field(default_factory=ValidityRules)
    priority: bool = False
    timeout_s: float = 30.0


Progress = Callable[[str], None]


def http_runner(
    url: str, options: HttpOptions = HttpOptions(), progress: Progress | None = None
) -> EndpointStepRunner:
    """The HTTP load runner against `url` (its model read from /v1/models at the first step)."""
    return EndpointStepRunner(
        url,
        options.mode,
        options.workload,
        options.api,
        options.warmup_s,
        options.rules,
        options.priority,
        progress,
        options.timeout_s,
    )


def checked_http_runner(
    url: str, options: HttpOptions = HttpOptions(), progress: Progress | None = None
) -> EndpointStepRunner:
    """`http_runner`, having reached the engine once; raises ValueError naming the URL otherwise."""
    runner = http_runner(url, options, progress)
    runner.check()
    return runner


def locust_runner(endpoint: EndpointStepRunner, options: HttpOptions, workers: int) -> StepRunner:
    """Locust workers sending what `endpoint` sends (it must have reached its engine: the model)."""
    plan = LocustPlan(
        endpoint.base_url,
        endpoint.model,
        1.0,
        1.0,
        workers,
        workload=endpoint.workload,  # fitted to the engine's tokenizer when it reached the engine
        api=options.api,
        timeout_s=options.timeout_s,
        warmup_s=options.warmup_s,
        engine_metrics_url=metrics_url(endpoint.base_url),
        priority=options.priority,
    )
    return LocustStepRunner(plan, options.rules)


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
