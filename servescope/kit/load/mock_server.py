"""A local OpenAI-compatible server that queues like an engine: slots, a TTFT and a per-token delay.

It answers /v1/completions and /v1/chat/completions (streamed as SSE, or not), and serves vLLM's own
metric names on /metrics (running, waiting, TTFT and e2e histograms, request and token counters, the
length histograms), so the load client, its engine sampling and the replay can be tested end to end,
and the client's own ceiling measured. A request takes a slot for its whole life; with every slot
taken it waits, FIFO, and counts as waiting, as a continuous-batching engine's queue does. HTTP/1.1 on
asyncio streams: bounded heads and bodies, keep-alive, chunked streaming.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from servescope.core.errors import ServescopeError

MAX_HEAD_BYTES = 16 * 1024
MAX_BODY_BYTES = 1024 * 1024
MAX_TOKENS = 4096
# vLLM 0.x's own buckets, so that bucket-bound cross-checks read the same edges as against vLLM.
TTFT_BUCKETS: tuple[float, ...] = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
)
TTFT_BUCKETS += (20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0)
LENGTH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


@dataclass(frozen=True)
class MockConfig:
    """How the mock engine behaves: concurrent slots, time to first token, time per further token."""

    slots: int = 8
    ttft_s: float = 0.02
    token_s: float = 0.005
    model: str = "mock"


@dataclass(frozen=True, slots=True)
class Booking:
    """One request's timeline, fixed when it arrives (perf_counter seconds)."""

    arrived: float
    start: float  # when a slot takes it: the arrival, or when the earliest slot frees
    first: float  # its first token: start + ttft
    done: float  # its last token: first + (tokens - 1) x token delay


class MockEngine:
    """The queueing engine behind the HTTP front, with vLLM-named metrics on its own registry.

    Its queue is computed, not slept: each arrival books the slot that frees first (FIFO), and its
    first and last token times follow from that slot's start. A late event loop (a busy machine) then
    delays when a token is *sent*, never when the slot frees, so the engine serves exactly the queue
    its parameters describe, whose latency a queue simulation computes.
    """

    def __init__(self, config: MockConfig) -> None:
        if config.slots < 1 or config.ttft_s < 0 or config.token_s < 0:
            raise ValueError(f"mock config {config}: slots >= 1 and non-negative delays required")
        self.config = config
        self._free = [0.0] * config.slots  # a heap of the times each slot frees
        self._booked: list[Booking] = []  # bookings not yet done (the running and waiting gauges)
        self.registry = CollectorRegistry()
        self._gauge("vllm:num_requests_running", "Requests in a slot").set_function(
            lambda: self._count(waiting=False)
        )
        self._gauge("vllm:num_requests_waiting", "Requests waiting for a slot").set_function(
            lambda: self._count(waiting=True)
        )
        self.ttft = self._histogram("vllm:time_to_first_token_seconds", "TTFT from arrival", TTFT_BUCKETS)
        self.e2e = self._histogram("vllm:e2e_request_latency_seconds", "E2E from arrival", E2E_BUCKETS)
        self.prompt_lengths = self._histogram("vllm:request_prompt_tokens", "Prompt tokens", LENGTH_BUCKETS)
        self.output_lengths = self._histogram(
            "vllm:request_generation_tokens", "Output tokens", LENGTH_BUCKETS
        )
        self.success = Counter(
            "vllm:request_success",
            "Finished requests",
            ["model_name", "finished_reason"],
            registry=self.registry,
        ).labels(config.model, "length")
        self.prompt_tokens = self._counter("vllm:prompt_tokens", "Prompt tokens")
        self.generation_tokens = self._counter("vllm:generation_tokens", "Generated tokens")

    def _gauge(self, name: str, text: str) -> Gauge:
        return Gauge(name, text, ["model_name"], registry=self.registry).labels(self.config.model)

    def _counter(self, name: str, text: str) -> Counter:
        return Counter(name, text, ["model_name"], registry=self.registry).labels(self.config.model)

    def _histogram(self, name: str, text: str, buckets: tuple[float, ...]) -> Histogram:
        family = Histogram(name, text, ["model_name"], registry=self.registry, buckets=buckets)
        return family.labels(self.config.model)

    def _count(self, *, waiting: bool) -> int:
        now = time.perf_counter()
        self._booked = [b for b in self._booked if b.done > now]
        return sum(1 for b in self._booked if (b.start > now) == waiting)

    def book(self, max_tokens: int) -> Booking:
        """Take the slot that frees first, now: the request's whole timeline."""
        arrived = time.perf_counter()
        start = max(arrived, heapq.heappop(self._free))
        first = start + self.config.ttft_s
        booking = Booking(arrived, start, first, first + max(0, max_tokens - 1) * self.config.token_s)
        heapq.heappush(self._free, booking.done)
        self._booked.append(booking)
        return booking

    async def generate(self, prompt_tokens: int, max_tokens: int) -> AsyncIterator[int]:
        """Yield token indexes at their booked times: the first after the queue and TTFT, then one per
        token delay. The slot stays booked to the last token even if the client goes away."""
        booking = self.book(max_tokens)
        for index in range(max_tokens):
            due = booking.first + index * self.config.token_s
            wait = due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            if index == 0:
                self.ttft.observe(booking.first - booking.arrived)
            yield index
        self.finished(prompt_tokens, max_tokens, booking.done - booking.arrived)

    def finished(self, prompt_tokens: int, output_tokens: int, e2e_s: float) -> None:
        """Count one finished request as vLLM does: success, token counters, length histograms."""
        self.e2e.observe(e2e_s)
        self.success.inc()
        self.prompt_tokens.inc(prompt_tokens)
        self.generation_tokens.inc(output_tokens)
        self.prompt_lengths.observe(prompt_tokens)
        self.output_lengths.observe(output_tokens)


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


def parse_completion(body: bytes, chat: bool) -> Completion:
    """The parts of an OpenAI completion request the mock uses; BadRequestError naming a bad field."""
    try:
        request = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BadRequestError("body is not JSON") from None
    if not isinstance(request, dict):
        raise BadRequestError("body is not a JSON object")
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
    return Completion(chat, request.get("stream") is True, usage, max(1, len(text.split())), max_tokens)


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
    model = engine.config.model
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
    body = {"id": "mock", "model": engine.config.model, "choices": [choice], "usage": _usage(completion)}
    return json.dumps(body).encode()


def metrics_page(engine: MockEngine) -> bytes:
    return generate_latest(engine.registry)
