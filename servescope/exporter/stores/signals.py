"""The data the vLLM source hands to the stores: an engine's normalised signals and its GPU processes."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class GpuProcess:
    gpu: str
    uuid: str
    pid: int


@dataclass
class Histogram:
    buckets: dict[str, float] = field(default_factory=dict)  # le (as written) -> cumulative count
    sum: float = 0.0
    count: float = 0.0


@dataclass
class EngineSignals:
    model_name: str
    engine: str
    values: dict[str, float] = field(default_factory=dict)  # gauges and counters
    finished: dict[str, float] = field(default_factory=dict)  # finished_reason -> count
    histograms: dict[str, Histogram] = field(default_factory=dict)
    cache: dict[str, str] = field(default_factory=dict)  # cache_config_info labels


@dataclass
class Normalised:
    backend: str
    generation: str
    engines: dict[tuple[str, str], EngineSignals] = field(default_factory=dict)
