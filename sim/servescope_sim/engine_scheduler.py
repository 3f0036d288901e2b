"""The simulated engine's scheduler half: KV blocks, preemption, and planning each engine step.

Whole prefills by default (the first prompt of a step may exceed `max_num_batched_tokens`, the next
that does not fit waits for a later step); chunked prefill splits prompts to fill the budget exactly.
"""

from __future__ import annotations

from collections import deque

from servescope_sim.engine_config import EngineConfig, StepCost
from servescope_sim.engine_model import Request, Step
from servescope_sim.engine_stats import EngineStats


class Scheduling:
    """Admission and step planning over the engine's queues; SimulatedEngine supplies the state."""

    config: EngineConfig
    stats: EngineStats
    _waiting: deque[Request]
    _running: list[Request]
    _blocks: int
    _used_blocks: int
    _context_tokens: int
    _cost: StepCost

    def _take(self, req: Request, blocks: int) -> None:
        req.blocks += blocks
        self._used_blocks += blocks

    def _release(self, req: Request) -> None:
        self._used_blocks -= req.blocks
        self._context_tokens -= req.context
        req.blocks = 0

    def _preempt(self, req: Request) -> None:
        # vLLM V1 preempts by recomputation: the KV is freed and the request waits at the queue head.
        self._release(req)
        req.preemptions += 1
        self.stats.preemptions += 1
        self._waiting.appendleft(req)

    def _grow_running(self) -> bool:
        """Give each running sequence room for its next token, preempting the newest when blocks run out."""
        preempted = False
        i = 0
        block_size = self.config.block_size  # blocks_for() inlined: this runs per sequence per step
        while i < len(self._running):
            req = self._running[i]
            need = -(-(req.prompt + req.generated) // block_size) - req.blocks
            while need > self._blocks - self._used_blocks:
                preempted = True
                victim = self._running.pop()
                self._preempt(victim)
                if victim is req:
                    return preempted
            self._take(req, need)
            i += 1
        return preempted

    def _plan(self, start: float) -> Step:
        c = self.config
        preempted = self._grow_running()
        if c.scheduling_policy == "priority":
            # Shortest prompt first; sorted() is stable, so equal prompts keep their arrival order.
            self._waiting = deque(sorted(self._waiting, key=lambda r: r.prompt))
        if c.enable_chunked_prefill:
            return self._plan_chunked(start, preempted)
        decoding = list(self._running)
        prefilling: list[Request] = []
        tokens, prefill = len(decoding), 0
        # Like vLLM, a step that had to preempt admits nobody new.
        while not preempted and self._waiting and len(self._running) < c.max_num_seqs:
            req = self._waiting[0]
            compute = req.context - req.cached
            need = self.config.blocks_for(req.context)
            if need > self._blocks - self._used_blocks:
                break
            if prefilling and tokens + compute > c.max_num_batched_tokens:
                break
            self._admit(start, need)
            prefilling.append(req)
            tokens += compute
            prefill += compute
        seconds = self._cost.seconds(len(self._running), self._context_tokens, prefill)
        return Step(start, start + seconds, decoding, prefilling, tokens)

    def _admit(self, start: float, blocks: int) -> Request:
        req = self._waiting.popleft()
        self._take(req, blocks)
        self._context_tokens += req.context
        if req.scheduled_at is None:
            req.scheduled_at = start
            self.stats.prefix_queries += req.prompt
            self.stats.prefix_hits += req.cached
        self._running.append(req)
        return req

    def _plan_chunked(self, start: float, preempted: bool) -> Step:
        """Chunked prefill: decodes first, then prompt chunks fill the step's token budget exactly."""
        c = self.config
        decoding = [req for req in self._running if req.pending == 0]
        budget = c.max_num_batched_tokens - len(decoding)
        prefilling = [req for req in self._running if req.pending > 0]
        while not preempted and self._waiting and len(self._running) < c.max_num_seqs:
            need = c.blocks_for(self._waiting[0].context)
            if budget <= sum(req.pending for req in prefilling) or need > self._blocks - self._used_blocks:
                break
            req = self._admit(start, need)
            req.pending = req.context - req.cached
            prefilling.append(req)
        prefill, chunked = 0, []
        for req in prefilling:
            chunk = min(req.pending, budget - prefill)
            if chunk <= 0:
                break
            req.pending -= chunk
            prefill += chunk
            chunked.append(req)
        seconds = self._cost.seconds(len(self._running), self._context_tokens, prefill)
        return Step(start, start + seconds, decoding, chunked, len(decoding) + prefill)
