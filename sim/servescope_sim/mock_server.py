"""A local OpenAI-compatible server that queues like an engine: slots, a TTFT and a per-token delay.

It answers /v1/completions and /v1/chat/completions (streamed as SSE, or not), and serves vLLM's
/metrics page, rendered as the simulated engine's (vllm_metrics.py, vLLM's buckets), from what it
records as vLLM does (running, waiting, TTFT and e2e histograms, request and token counters, the length
histograms), so the load client, its engine sampling and the replay can be tested end to end, and the
client's own ceiling measured. A request takes a slot for its whole life; with every slot
taken it waits, FIFO, and counts as waiting, as a continuous-batching engine's queue does. HTTP/1.1 on
asyncio streams: bounded heads and bodies, keep-alive, chunked streaming.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from servescope.core.errors import ServescopeError
from servescope_sim.engine_config import EngineConfig
from servescope_sim.engine_stats import EngineStats
from servescope_sim.vllm_metrics import render_metrics

MAX_HEAD_BYTES = 16 * 1024
MAX_BODY_BYTES = 1024 * 1024
MAX_TOKENS = 4096
# The KV cache the mock reports: as many tokens as its slots hold at the longest request.
MAX_MODEL_LEN = 8192
BLOCK_SIZE = 16
# Prompts the mock's prefix cache remembers, the oldest forgotten first: a bound, not a KV cache's size.
CACHED_PROMPTS = 100_000


@dataclass(frozen=True)
class MockConfig:
    """How the mock engine behaves: concurrent slots, time to first token, time per further token."""

    slots: int = 8
    ttft_s: float = 0.02
    token_s: float = 0.005
    model: str = "mock"
    # Tokens its tokenizer makes of a prompt's word: 1 for the large vocabularies of production models;
    # more for a small one (the CPU test model's makes about 5), which `/tokenize` tells a client.
    tokens_per_word: int = 1


@dataclass(frozen=True, slots=True)
class Booking:
    """One request's timeline, fixed when it arrives (perf_counter seconds)."""

    arrived: float
    start: float  # when a slot takes it: the arrival, or when the earliest slot frees
    first: float  # its first token: start + ttft
    done: float  # its last token: first + (tokens - 1) x token delay


class MockEngine:
    """The queueing engine behind the HTTP front; it records what vLLM records (EngineStats) and its
    /metrics page is rendered as the simulated engine's.

    Its queue is computed, not slept: each arrival books the slot that frees first (FIFO), and its
    first and last token times follow from that slot's start. A late event loop (a busy machine) then
    delays when a token is *sent*, never when the slot frees, so the engine serves exactly the queue
    its parameters describe, whose latency a queue simulation computes.
    """

    engine_id = "0"

    def __init__(self, mock: MockConfig) -> None:
        if mock.slots < 1 or mock.ttft_s < 0 or mock.token_s < 0:
            raise ValueError(f"mock config {mock}: slots >= 1 and non-negative delays required")
        self.mock = mock
        self.model_name = mock.model
        self._free = [0.0] * mock.slots  # a heap of the times each slot frees
        self._booked: list[Booking] = []  # bookings not yet done (the running and waiting gauges)
        # Read by the rendering: the cache config and what vLLM records since the process started.
        blocks = max(1, mock.slots * MAX_MODEL_LEN // BLOCK_SIZE)
        self.config = EngineConfig(block_size=BLOCK_SIZE, num_gpu_blocks=blocks, max_model_len=MAX_MODEL_LEN)
        self.stats = EngineStats.new(created=time.time(), max_model_len=MAX_MODEL_LEN)
        self._prompts_seen: OrderedDict[bytes, None] = OrderedDict()

    def look_up_prefix(self, digest: bytes, prompt_tokens: int) -> None:
        """Count a prompt in the prefix cache as vLLM does (queried tokens, hit tokens). The mock caches
        whole prompts: a prompt sent before hits in its full blocks, as on vLLM, whose prefix cache keeps
        the blocks of every prompt until their memory is needed; a shared prefix alone is not a hit here.
        """
        self.stats.prefix_queries += prompt_tokens
        if digest in self._prompts_seen:
            self._prompts_seen.move_to_end(digest)
            self.stats.prefix_hits += prompt_tokens // BLOCK_SIZE * BLOCK_SIZE
            return
        self._prompts_seen[digest] = None
        if len(self._prompts_seen) > CACHED_PROMPTS:
            self._prompts_seen.popitem(last=False)

    @property
    def num_running(self) -> int:
        return self._count(waiting=False)

    @property
    def num_waiting(self) -> int:
        return self._count(waiting=True)

    @property
    def kv_cache_usage(self) -> float:
        return self.num_running / self.mock.slots

    def _count(self, *, waiting: bool) -> int:
        now = time.perf_counter()
        self._booked = [b for b in self._booked if b.done > now]
        return sum(1 for b in self._booked if (b.start > now) == waiting)

    def book(self, max_tokens: int) -> Booking:
        """Take the slot that frees first, now: the request's whole timeline."""
        arrived = time.perf_counter()
        start = max(arrived, heapq.heappop(self._free))
        first = start + self.mock.ttft_s
        booking = Booking(arrived, start, first, first + max(0, max_tokens - 1) * self.mock.token_s)
        heapq.heappush(self._free, booking.done)
        self._booked.append(booking)
        return booking

    async def generate(self, prompt_tokens: int, max_tokens: int) -> AsyncIterator[int]:
        """Yield token indexes at their booked times: the first after the queue and TTFT, then one per
        token delay. The slot stays booked to the last token even if the client goes away."""
        booking = self.book(max_tokens)
        for index in range(max_tokens):
            due = booking.first + index * self.mock.token_s
            wait = due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            if index == 0:
                self.stats.observe("time_to_first_token_seconds", booking.first - booking.arrived)
            yield index
        self.finished(prompt_tokens, max_tokens, booking.done - booking.arrived)

    def finished(self, prompt_tokens: int, output_tokens: int, e2e_s: float) -> None:
        """Count one finished request as vLLM does: success, token counters, length histograms."""
        self.stats.finished["length"] += 1
        self.stats.prompt_tokens += prompt_tokens
        self.stats.generation_tokens += output_tokens
        for name, value in (
            ("e2e_request_latency_seconds", e2e_s),
            ("request_prompt_tokens", prompt_tokens),
            ("request_generation_tokens", output_tokens),
        ):
            self.stats.observe(name, value)


class BadRequestError(ServescopeError):
    """The request cannot be answered; the message names what was wrong."""

    reason = "bad_request"


@dataclass(frozen=True)
class Completion:
    chat: bool
    stream: bool
    usage_in_stream: bool
    prompt_tokens: int
    max_tokens: int
    prompt_digest: bytes = b""  # the prompt's text, hashed: the key of the mock's prefix cache


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        request = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BadRequestError("body is not JSON") from None
    if not isinstance(request, dict):
        raise BadRequestError("body is not a JSON object")
    return request


def token_count(body: bytes, tokens_per_word: int) -> bytes:
    """vLLM's `POST /tokenize` answer for a completions-style body: the prompt's count, as the mock counts
    a completion's prompt (it adds no special tokens)."""
    prompt = _json_object(body).get("prompt")
    if not isinstance(prompt, str):
        raise BadRequestError("prompt is not a string")
    count = len(prompt.split()) * tokens_per_word
    return json.dumps({"count": count, "max_model_len": MAX_MODEL_LEN, "tokens": [0] * count}).encode()


def parse_completion(body: bytes, chat: bool, tokens_per_word: int = 1) -> Completion:
    """The parts of an OpenAI completion request the mock uses; BadRequestError naming a bad field."""
    request = _json_object(body)
    max_tokens = request.get("max_tokens", 16)
    if not isinstance(max_tokens, int) or not 1 <= max_tokens <= MAX_TOKENS:
        raise BadRequestError(f"max_tokens {max_tokens!r} is not an integer in 1..{MAX_TOKENS}")
    if chat:
        messages = request.get("messages")
        if not isinstance(messages, list):
            raise BadRequestError("messages is not a list")
        text = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    else:
        text = str(request.get("prompt", ""))
    options = request.get("stream_options")
    usage = isinstance(options, dict) and options.get("include_usage") is True
    prompt_tokens = max(1, len(text.split()) * tokens_per_word)
    digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
    return Completion(chat, request.get("stream") is True, usage, prompt_tokens, max_tokens, digest)


def _chunk(completion: Completion, model: str, text: str | None, usage: dict[str, int] | None) -> bytes:
    choices: list[dict[str, Any]] = []
    if text is not None:
        key = {"delta": {"content": text}} if completion.chat else {"text": text}
        choices = [{"index": 0, **key, "finish_reason": None}]
    kind = "chat.completion.chunk" if completion.chat else "text_completion"
    payload: dict[str, Any] = {"id": "mock", "object": kind, "model": model, "choices": choices}
    if usage is not None:
        payload["usage"] = usage
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _usage(completion: Completion) -> dict[str, int]:
    total = completion.prompt_tokens + completion.max_tokens
    return {
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.max_tokens,
        "total_tokens": total,
    }


async def stream_events(engine: MockEngine, completion: Completion) -> AsyncIterator[bytes]:
    """The SSE events of one streamed completion, ending with usage (when asked) and [DONE]."""
    model = engine.mock.model
    async for _ in engine.generate(completion.prompt_tokens, completion.max_tokens):
        yield _chunk(completion, model, " tok", None)
    if completion.usage_in_stream:
        yield _chunk(completion, model, None, _usage(completion))
    yield b"data: [DONE]\n\n"


async def whole_answer(engine: MockEngine, completion: Completion) -> bytes:
    async for _ in engine.generate(completion.prompt_tokens, completion.max_tokens):
        pass
    text = " tok" * completion.max_tokens
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
    choice.update({"message": {"role": "assistant", "content": text}} if completion.chat else {"text": text})
    body = {"id": "mock", "model": engine.mock.model, "choices": [choice], "usage": _usage(completion)}
    return json.dumps(body).encode()


def metrics_page(engine: MockEngine) -> bytes:
    """vLLM's /metrics page of the mock: the simulated engine's families, rendered the same way."""
    return render_metrics(engine).encode()
