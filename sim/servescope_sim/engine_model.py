"""The simulated engine's requests and steps: how a request is drawn, progresses and ends.

The engine's configuration and the time a step takes: engine_config.py.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from servescope_sim.engine_config import EngineConfig


@dataclass(slots=True, eq=False)
class Request:
    """One request's progress: identity comparison only, as the queues hold and remove exact objects."""

    arrival: float
    prompt: int
    max_tokens: int
    natural_length: int  # where the model would emit end-of-sequence
    cached: int  # prompt tokens found in the prefix cache
    client: bool  # sent by a closed-loop client, which sends another when this one ends
    abort_after: int | None = None
    generated: int = 0
    blocks: int = 0
    preemptions: int = 0
    pending: int = 0  # prompt tokens still to prefill (chunked prefill), after the step planned
    scheduled_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float = 0.0
    done: bool = False

    @property
    def context(self) -> int:
        return self.prompt + self.generated


@dataclass(slots=True)
class Step:
    """An engine step in flight: planned at `start`, its tokens come out at `end`."""

    start: float
    end: float
    decoding: list[Request]
    prefilling: list[Request]
    tokens: int


@dataclass(frozen=True, slots=True)
class FinishedRequest:
    """What a finished request looked like, kept for tests and scenario checks."""

    arrival: float
    finished: float
    e2e: float
    reason: str
    prompt_tokens: int
    generation_tokens: int
    preemptions: int
    first_token: float | None = None


def new_request(config: EngineConfig, arrival: float, rng: random.Random, *, client: bool) -> Request:
    """A request arriving at `arrival`, its lengths and prefix-cache share drawn from `rng`."""
    c = config
    prompt = min(c.context_limit - 1, _lognormal(rng, c.prompt_tokens, c.prompt_sigma))
    natural = _lognormal(rng, c.output_tokens, c.output_sigma)
    share = min(1.0, rng.uniform(0.0, 2.0 * c.prefix_hit_fraction))
    # Prefix-cache hits come in whole blocks, and vLLM always computes the last prompt token.
    cached = min(prompt - 1, int(prompt * share) // c.block_size * c.block_size)
    cached = cached if c.enable_prefix_caching else 0
    aborts = rng.random() < c.abort_fraction
    abort_after = max(1, natural // 2) if aborts else None
    return Request(arrival, prompt, c.max_tokens, natural, cached, client, abort_after)


def finish_reason(req: Request, context_limit: int) -> str | None:
    """Why `req` ends after its latest token (abort, stop, length), or None while it goes on;
    `context_limit` is the engine config's (read once per step by the caller: this runs per token)."""
    if req.abort_after is not None and req.generated >= req.abort_after:
        return "abort"
    if req.generated >= req.natural_length and req.natural_length < req.max_tokens:
        return "stop"
    if req.generated >= req.max_tokens or req.prompt + req.generated >= context_limit:
        return "length"
    return None


def _lognormal(rng: random.Random, mean: float, sigma: float) -> int:
    """A positive integer drawn log-normally with the given mean."""
    return max(1, round(rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)))
