"""Open-loop arrival schedules and request shapes, precomputed from a seed before a step starts.

Precomputing the send times means the schedule never depends on how fast the server answers: a client
that falls behind shows it as schedule lag instead of quietly sending less (coordinated omission).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Arrival = Literal["constant", "poisson", "gamma"]
ARRIVALS: tuple[Arrival, ...] = ("constant", "poisson", "gamma")
MAX_REQUESTS = 1_000_000  # one step's schedule; far beyond any step a single client can send
MAX_LENGTH = 1_000_000
MAX_SHAPES_FILE_LINES = 100_000


def arrival_times(
    rate: float, duration_s: float, *, arrival: Arrival = "poisson", cv: float = 1.0, seed: int = 0
) -> list[float]:
    """Send times in [0, duration_s) at `rate` req/s; `cv`: the gamma gaps' coefficient of variation."""
    if rate <= 0 or duration_s <= 0:
        raise ValueError(f"rate {rate} and duration {duration_s} must both be positive")
    if rate * duration_s > MAX_REQUESTS:
        raise ValueError(f"rate {rate}/s over {duration_s} s exceeds {MAX_REQUESTS} requests")
    if arrival == "constant":
        return [i / rate for i in range(math.ceil(rate * duration_s - 1e-9))]
    if arrival == "poisson":
        cv = 1.0
    elif arrival != "gamma":
        raise ValueError(f"arrival {arrival!r} is not one of {', '.join(ARRIVALS)}")
    if cv <= 0:
        raise ValueError(f"cv {cv} must be positive")
    # Gamma gaps with shape 1/cv^2 and mean 1/rate; cv 1 is exponential (Poisson), above 1 is bursty.
    shape = 1.0 / (cv * cv)
    scale = 1.0 / (rate * shape)
    rng = random.Random(seed)
    times: list[float] = []
    at = rng.gammavariate(shape, scale) * rng.random()  # a stationary start, not a burst at zero
    while at < duration_s:
        times.append(at)
        at += rng.gammavariate(shape, scale)
    return times


@dataclass(frozen=True, slots=True)
class Shape:
    """One request: prompt tokens asked for, output tokens to generate, and its prompt text when the
    workload chose one (empty: the client writes `prompt_tokens` words of its fixed prompt)."""

    prompt_tokens: int
    output_tokens: int
    prompt: str = ""


@dataclass(frozen=True, slots=True)
class LengthDistribution:
    """Prompt and output lengths: a fixed mean with a uniform spread of +-`spread` (a fraction)."""

    prompt_mean: int = 128
    output_mean: int = 32
    spread: float = 0.0

    def sample(self, count: int, seed: int) -> list[Shape]:
        rng = random.Random(seed ^ 0x5EED)
        return [
            Shape(_spread(rng, self.prompt_mean, self.spread), _spread(rng, self.output_mean, self.spread))
            for _ in range(count)
        ]


def _spread(rng: random.Random, mean: int, spread: float) -> int:
    if spread <= 0:
        return max(1, mean)
    return max(1, round(mean * (1 + rng.uniform(-spread, spread))))


@dataclass(frozen=True, slots=True)
class ShapeList:
    """Lengths cycled from a list, e.g. read from a JSONL file or derived from production histograms."""

    shapes: tuple[Shape, ...]

    def sample(self, count: int, seed: int) -> list[Shape]:
        rng = random.Random(seed ^ 0x5EED)
        return [self.shapes[rng.randrange(len(self.shapes))] for _ in range(count)]


def read_jsonl(path: Path, parse: Callable[[str], Shape | None]) -> tuple[list[Shape], int]:
    """The shapes `parse` finds in a JSONL file's lines (the first MAX_SHAPES_FILE_LINES), and how many
    lines it found none in (blank lines are no line)."""
    shapes: list[Shape] = []
    bad = 0
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines):
            if number >= MAX_SHAPES_FILE_LINES:
                break
            if line.strip():
                shape = parse(line)
                bad += shape is None
                shapes += [] if shape is None else [shape]
    return shapes, bad


def read_shapes(path: Path) -> tuple[ShapeList, int]:
    """Shapes from JSONL lines {"prompt_tokens": N, "output_tokens": M}; also how many lines were bad."""
    shapes, bad = read_jsonl(path, _shape_of)
    if not shapes:
        raise ValueError(f"{path}: no line has positive integer prompt_tokens and output_tokens")
    return ShapeList(tuple(shapes)), bad


def json_object(line: str) -> dict[str, Any] | None:
    """The JSON object a line holds, or None for anything else."""
    try:
        item = json.loads(line)
    except json.JSONDecodeError:
        return None
    return item if isinstance(item, dict) else None


def _shape_of(line: str) -> Shape | None:
    item = json_object(line)
    if item is None:
        return None
    prompt, output = item.get("prompt_tokens"), item.get("output_tokens")
    if not (_length(prompt) and _length(output)):
        return None
    return Shape(int(prompt or 0), int(output or 0))


def _length(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_LENGTH


def split_schedule(times: Sequence[float], workers: int, index: int) -> list[float]:
    """Worker `index`'s share of one schedule: every `workers`-th send, so the shares interleave."""
    if not 0 <= index < workers:
        raise ValueError(f"worker index {index} is outside 0..{workers - 1}")
    return list(times[index::workers])


def step_prompts_seed(seed: int, offered: float) -> int:
    """The seed of a step's prompts: its own seed mixed with its rate. A search's steps at different
    rates share a seed, and the same prompts again would be answered from a real engine's prefix cache
    (vLLM keeps a prompt's blocks until their memory is needed): the later step's prefill nearly free, its
    latency and the knee too good. Still the same requests for the same (seed, rate) in every runner."""
    return (seed * 1_000_003 + round(offered * 1000)) & 0x7FFF_FFFF
