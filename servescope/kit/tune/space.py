"""The declared search space (YAML): engine flags with their candidate values, conditions, objectives.

    engine: {num_gpu_blocks: 4096}          # fixed flags of every trial (optional)
    parameters:
      max_num_seqs: [16, 32, 64, 128]       # candidate values, tried in this order by grid search
      enable_chunked_prefill: [false, true]
      max_num_batched_tokens:               # conditional: only where the condition holds
        values: [512, 2048]
        when: {enable_chunked_prefill: true}
    objective: knee                         # or goodput (requests/s meeting every SLO at the knee)
    second_objective: gpus                  # optional: gpus or cost, for the Pareto front
    peak_qps: 100                           # sizing for the second objective (20 % buffer)
    gpu_hour_cost: 3.0
    capacity: {slo: [ttft:0.5], duration_s: 20, repeats: 1, warmup_s: 5}
    workload: {kind: random, prompt_tokens: 512, output_tokens: 128, prefix_share: 0.2, api: chat}

A condition names earlier parameters only, each with one value or a list of values. The workload is
what an HTTP launcher's trials send (the simulated engine has its own).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from servescope.kit.capacity.search import SearchPlan
from servescope.kit.capacity.steps import Slo
from servescope.kit.load.client import Api
from servescope.kit.load.workload import Workload

FLAG_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
MAX_SPACE_BYTES = 256 * 1024
MAX_COMBINATIONS = 100_000
Value = bool | int | float | str | None


@dataclass(frozen=True, slots=True)
class Parameter:
    """One flag: its candidate values and the condition under which it applies."""

    name: str
    values: tuple[Value, ...]
    when: tuple[tuple[str, tuple[Value, ...]], ...] = ()

    def applies(self, chosen: Mapping[str, Value]) -> bool:
        return all(name in chosen and chosen[name] in allowed for name, allowed in self.when)


@dataclass(frozen=True, slots=True)
class Space:
    """A parsed search space."""

    parameters: tuple[Parameter, ...]
    plan: SearchPlan
    engine: dict[str, Value] = field(default_factory=dict)
    objective: str = "knee"
    second_objective: str | None = None
    peak_qps: float = 100.0
    gpu_hour_cost: float = 1.0
    gpus_per_replica: int = 1
    warmup_s: float = 5.0
    workload: Workload = field(default_factory=Workload)
    api: Api = "completions"

    def grid(self) -> Iterator[dict[str, Value]]:
        """Every valid combination, first parameter slowest, in declared value order."""
        yield from _expand(self.parameters, {})

    def size(self) -> int:
        return sum(1 for _ in itertools.islice(self.grid(), MAX_COMBINATIONS + 1))


def _expand(parameters: tuple[Parameter, ...], chosen: dict[str, Value]) -> Iterator[dict[str, Value]]:
    if not parameters:
        yield dict(chosen)
        return
    first, rest = parameters[0], parameters[1:]
    if not first.applies(chosen):
        yield from _expand(rest, chosen)
        return
    for value in first.values:
        yield from _expand(rest, {**chosen, first.name: value})


def load_space(path: Path) -> Space:
    """Read and check a space file; raises ValueError naming the file and the problem."""
    try:
        if path.stat().st_size > MAX_SPACE_BYTES:
            raise ValueError(f"larger than {MAX_SPACE_BYTES} bytes")
        return parse_space(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, ValueError) as err:
        raise ValueError(f"{path}: {err}") from err


def parse_space(data: Any) -> Space:
    """A space from already-loaded YAML data; raises ValueError naming what is wrong."""
    # One piece: each key of the file checked where it is read, so an error names it.
    if not isinstance(data, dict) or not isinstance(data.get("parameters"), dict) or not data["parameters"]:
        raise ValueError("a search space needs a non-empty `parameters` mapping")
    parameters: list[Parameter] = []
    for name, spec in data["parameters"].items():
        parameters.append(_parameter(str(name), spec, {p.name for p in parameters}))
    capacity = data.get("capacity") or {}
    slos = tuple(Slo.parse(str(text)) for text in capacity.get("slo", ["ttft:0.5"]))
    plan = SearchPlan(
        slos,
        duration_s=float(capacity.get("duration_s", 20.0)),
        repeats=int(capacity.get("repeats", 1)),
        start_qps=float(capacity.get("start_qps", 1.0)),
        max_qps=float(capacity.get("max_qps", 1024.0)),
        resolution=float(capacity.get("resolution", 0.05)),
        max_parts=int(capacity.get("max_parts", 4)),
        confidence=float(capacity.get("confidence", 0.95)),
        min_requests=int(capacity.get("min_requests", 1000)),
    )
    objective, second = data.get("objective", "knee"), data.get("second_objective")
    if objective not in ("knee", "goodput") or second not in (None, "gpus", "cost"):
        raise ValueError("objective must be knee or goodput, second_objective gpus, cost or absent")
    engine = data.get("engine") or {}
    if not isinstance(engine, dict) or not all(FLAG_NAME.match(str(k)) for k in engine):
        raise ValueError("`engine` must map flag names (lower_case) to values")
    space = Space(
        tuple(parameters),
        plan,
        dict(engine),
        objective,
        second,
        float(data.get("peak_qps", 100.0)),
        float(data.get("gpu_hour_cost", 1.0)),
        int(data.get("gpus_per_replica", 1)),
        float(capacity.get("warmup_s", 5.0)),
        *_workload(data.get("workload") or {}),
    )
    if space.size() > MAX_COMBINATIONS:
        raise ValueError(f"the space has more than {MAX_COMBINATIONS} combinations")
    return space


def _workload(data: Any) -> tuple[Workload, Api]:
    """The trials' requests from the space's `workload` mapping; ValueError naming a bad field."""
    if not isinstance(data, dict):
        raise ValueError("`workload` must be a mapping (kind, prompt_tokens, output_tokens, ...)")
    fields = dict(data)
    api = fields.pop("api", "completions")
    if api not in ("completions", "chat"):
        raise ValueError(f"workload api {api!r}: completions or chat")
    known = {"kind", "prompt_tokens", "output_tokens", "spread", "prefix_share"}
    if set(fields) - known:
        raise ValueError(f"workload: unknown fields {sorted(set(fields) - known)} (known: {sorted(known)})")
    if fields.get("kind", "random") not in ("random", "fixed"):
        raise ValueError("workload kind: random or fixed (a dataset workload is a `capacity run` option)")
    try:
        return Workload(**fields), api
    except (TypeError, ValueError) as err:
        raise ValueError(f"workload: {err}") from None


def _parameter(name: str, spec: Any, earlier: set[str]) -> Parameter:
    if not FLAG_NAME.match(name):
        raise ValueError(f"parameter {name!r}: names are lower_case flag names")
    when: dict[str, Any] = {}
    if isinstance(spec, dict):
        values, when = spec.get("values"), spec.get("when") or {}
    else:
        values = spec
    if not isinstance(values, list) or not values or not all(_is_value(v) for v in values):
        raise ValueError(f"parameter {name!r}: give a non-empty list of plain values")
    if not isinstance(when, dict) or not set(when) <= earlier:
        raise ValueError(f"parameter {name!r}: `when` may name earlier parameters only")
    condition = tuple(
        (other, tuple(allowed) if isinstance(allowed, list) else (allowed,))
        for other, allowed in when.items()
    )
    return Parameter(name, tuple(values), condition)


def _is_value(value: object) -> bool:
    return value is None or isinstance(value, bool | int | float | str)
