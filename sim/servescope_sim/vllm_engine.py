"""A simulated vLLM engine: Poisson or closed-loop load, continuous batching, a paged KV cache, vLLM's stats.

Pure model on an explicit clock: `advance_to(t)` runs whole engine steps, each as long as the step-time
model says, and idles until the next arrival; the state depends only on the seed and on the control calls
(and when they were made), never on how often `advance_to` is called. Load, requests and step time: see
engine_config.py and engine_model.py.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import replace
from typing import Any

from servescope_sim.engine_config import EngineConfig, effective
from servescope_sim.engine_model import (
    FinishedRequest,
    Request,
    Step,
    finish_reason,
    new_request,
)
from servescope_sim.engine_params import EngineStartError
from servescope_sim.engine_scheduler import Scheduling
from servescope_sim.engine_stats import EngineStats, record_finished

__all__ = ["EngineConfig", "EngineStartError", "FinishedRequest", "SimulatedEngine"]


class SimulatedEngine(Scheduling):
    """One vLLM engine (one data-parallel rank) under load; EngineStartError where vLLM would not start."""

    def __init__(
        self,
        config: EngineConfig | None = None,
        *,
        seed: int = 0,
        model_name: str = "sim-llm",
        engine_id: str = "0",
        start: float = 0.0,
        wall_start: float = 1.7e9,
        history: int = 10_000,
    ) -> None:
        self.config = config or EngineConfig()
        flags = effective(self.config)
        self._flags = flags
        self._blocks, self._cost = (
            flags.num_gpu_blocks,
            self.config.cost.scaled(flags, self.config.prefill_factor),
        )
        self.model_name, self.engine_id = model_name, engine_id
        # One stream per source of randomness, so that the order in which they are drawn never matters.
        self._arrival_rng = random.Random(f"{seed}/arrivals")
        self._client_rng = random.Random(f"{seed}/clients")
        self._start, self._wall_start = start, wall_start
        self._time = start
        self.down = False
        self.finished: deque[FinishedRequest] = deque(maxlen=history)
        self._boot(start)

    def _boot(self, now: float) -> None:
        """Start (or restart) the engine process: empty queues and cache, fresh counters."""
        self.stats = EngineStats.new(created=self.wall(now), max_model_len=self.config.max_model_len)
        self._waiting: deque[Request] = deque()
        self._running: list[Request] = []
        self._step: Step | None = None
        self._free_at = now
        self._used_blocks = 0
        self._context_tokens = 0
        self._clients = 0
        self._next_arrival = self._draw_arrival(now)
        self._add_clients(now)

    # --- state ------------------------------------------------------------------------------------
    @property
    def now(self) -> float:
        return self._time

    def wall(self, t: float) -> float:
        """Unix time of engine time `t`."""
        return self._wall_start + (t - self._start)

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def kv_cache_usage(self) -> float:
        """Fraction of KV blocks held by running sequences (vLLM's kv_cache_usage_perc, 0-1)."""
        return self._used_blocks / self._blocks

    def in_flight(self) -> list[float]:
        """Arrival times of the requests waiting or running now."""
        return [req.arrival for req in (*self._waiting, *self._running)]

    # --- control ----------------------------------------------------------------------------------
    def set_load(
        self,
        *,
        arrival_rate: float | None = None,
        max_num_seqs: int | None = None,
        prompt_tokens: int | None = None,
        output_tokens: int | None = None,
        concurrency: int | None = None,
        prefill_factor: float | None = None,
    ) -> EngineConfig:
        """Change the load (and the build's prefill speed) from the current time on; raises ValueError
        naming any invalid value."""
        given: dict[str, Any] = {"arrival_rate": arrival_rate, "max_num_seqs": max_num_seqs}
        given |= {"prompt_tokens": prompt_tokens, "output_tokens": output_tokens, "concurrency": concurrency}
        given["prefill_factor"] = prefill_factor
        self.config = replace(self.config, **{k: v for k, v in given.items() if v is not None})
        self._cost = self.config.cost.scaled(
            self._flags, self.config.prefill_factor
        )  # steps planned from now
        if not self.down:
            if arrival_rate is not None:
                # Poisson arrivals are memoryless: redrawing the next one from now is exact.
                self._next_arrival = self._draw_arrival(self._time)
            self._add_clients(self._time)
        return self.config

    def set_down(self, down: bool) -> None:
        """Kill the engine process (requests in flight are lost) or start it again with fresh counters."""
        if down == self.down:
            return
        self.down = down
        if down:
            self._waiting.clear()
            self._running.clear()
            self._step, self._used_blocks, self._context_tokens, self._clients = None, 0, 0, 0
        else:
            self._boot(self._time)

    def abort(self, count: int | None = None) -> int:
        """The clients of the newest `count` requests (all when None) abort them; returns how many."""
        victims = sorted([*self._waiting, *self._running], key=lambda r: r.arrival, reverse=True)
        victims = victims if count is None else victims[:count]
        for req in victims:
            if req in self._waiting:
                self._waiting.remove(req)
            else:
                self._running.remove(req)
                self._release(req)
            self._finish(req, "abort", self._time)
        return len(victims)

    # --- time -------------------------------------------------------------------------------------
    def advance_to(self, t: float) -> None:
        """Run every engine step that ends by `t`; requests that arrive by `t` join the queue."""
        if t < self._time:
            return  # the clock never goes back
        while not self.down:
            if self._step is None:
                start = self._next_start()
                if start > t:
                    break
                self._ingest(start)
                self._step = self._plan(start)
            if self._step.end > t:
                break
            self._complete(self._step)
        self._time = t
        if not self.down:
            self._ingest(t)

    def _next_start(self) -> float:
        if self._running:
            return self._free_at
        first = self._waiting[0].arrival if self._waiting else self._next_arrival
        return max(self._free_at, first)

    def _draw_arrival(self, now: float) -> float:
        rate = self.config.arrival_rate
        if rate <= 0:
            return math.inf
        if self.config.arrival_pattern == "constant":
            return now + 1.0 / rate
        return now + self._arrival_rng.expovariate(rate)

    def _ingest(self, t: float) -> None:
        while self._next_arrival <= t:
            self._waiting.append(
                new_request(self.config, self._next_arrival, self._arrival_rng, client=False)
            )
            self._next_arrival = self._draw_arrival(self._next_arrival)

    def _add_clients(self, now: float) -> None:
        while self._clients < self.config.concurrency:
            self._clients += 1
            self._waiting.append(new_request(self.config, now, self._client_rng, client=True))

    def _complete(self, step: Step) -> None:
        end = step.end
        # Poisson arrivals during the step queue before the closed-loop requests its finishes send.
        self._ingest(end)
        self._step, self._free_at = None, end
        stats = self.stats
        stats.observe("iteration_tokens_total", step.tokens)
        decoding = [req for req in step.decoding if not req.done]
        # Every sequence that decoded had its previous token at the end of the previous step.
        stats.observe("inter_token_latency_seconds", end - step.start, len(decoding))
        for req in step.prefilling:
            if req.done or req.pending > 0:
                continue
            if req.first_token_at is None:
                req.first_token_at = end
                stats.observe("time_to_first_token_seconds", end - req.arrival)
                stats.prompt_tokens += req.prompt
                stats.cached_prompt_tokens += req.cached
            else:  # resumed after a preemption
                stats.observe("inter_token_latency_seconds", end - req.last_token_at)
            decoding.append(req)
        context_limit = self.config.context_limit
        for req in decoding:
            req.generated += 1
            req.last_token_at = end
            self._context_tokens += 1
            reason = finish_reason(req, context_limit)
            if reason is not None:
                self._release(req)
                self._finish(req, reason, end)
        stats.generation_tokens += len(decoding)
        self._running = [req for req in self._running if not req.done]

    def _finish(self, req: Request, reason: str, now: float) -> None:
        req.done = True
        record_finished(self.stats, req, reason, now)
        self.finished.append(
            FinishedRequest(
                req.arrival,
                now,
                now - req.arrival,
                reason,
                req.prompt,
                req.generated,
                req.preemptions,
                req.first_token_at,
            )
        )
        if req.client:
            self._clients -= 1
            self._add_clients(now)
