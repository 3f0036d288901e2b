"""Token counting from real SSE bytes: usage wins, the chunk count is the fallback, mismatches are named."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from servescope.kit.load.client import RequestSpec, TokenSource, body_of, new_client, send
from servescope.kit.load.records import RequestRecord
from servescope.kit.load.schedule import Shape


def sse(chunks: list[Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def text(t: str) -> dict[str, object]:
    return {"choices": [{"index": 0, "text": t}]}


def exchange(
    body: bytes, status: int = 200, stream: bool = True, clock: Callable[[], float] = lambda: 1.0
) -> tuple[RequestRecord, TokenSource]:
    """One request through the client to a local server that answers `body` with `status`."""

    async def answer(request: web.Request) -> web.Response:
        assert (await request.json())["stream"] is stream
        return web.Response(status=status, body=body, content_type="text/event-stream")

    async def go() -> tuple[RequestRecord, TokenSource]:
        app = web.Application()
        app.router.add_post("/v1/completions", answer)
        async with TestServer(app, host="127.0.0.1") as server, new_client(4) as client:
            spec = RequestSpec(str(server.make_url("")).rstrip("/"), "m", stream=stream)
            return await send(client, spec, Shape(4, 3), 0.0, clock)

    return asyncio.run(go())


def test_usage_is_the_count_and_agrees() -> None:
    usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}
    record, source = exchange(sse([text("a"), text("b"), text("c"), usage]))
    assert (record.ok, record.output_tokens, record.prompt_tokens, source) == (True, 3, 5, "usage")


def test_a_chunk_count_that_differs_from_usage_is_a_mismatch() -> None:
    usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4}}
    record, source = exchange(sse([text("ab"), text("c"), usage]))  # two chunks, four tokens
    assert (record.output_tokens, source) == (4, "mismatch")


def test_without_usage_the_chunks_are_counted() -> None:
    # A chunk with empty text still carries a token (a partial UTF-8 sequence); TTFT waits for text.
    record, source = exchange(sse([text(""), text("a"), text("b")]))
    assert (record.output_tokens, source) == (3, "chunks")


def test_failures_become_reasons() -> None:
    assert exchange(b"overloaded", status=503)[0].error == "http_503"
    assert exchange(b"data: {not json\n\n")[0].error == "bad_response"
    assert exchange(sse([{"choices": []}]))[0].error == "no_content"


def test_chunk_gaps_are_the_inter_token_latency_per_chunk() -> None:
    ticks = iter([1.0, 1.1, 1.3, 1.6, 2.0])  # sent, then one tick per content chunk, then done
    record, _ = exchange(sse([text("a"), text("b"), text("c")]), clock=lambda: next(ticks))
    assert record.first_token_s == 1.1 and record.chunk_gaps == pytest.approx((0.2, 0.3))


def test_request_bodies_ask_for_usage_and_ignore_eos() -> None:
    chat = body_of(RequestSpec("http://e", "m", api="chat"), Shape(3, 7))
    assert chat["messages"][0]["content"] == "hello hello hello"
    assert (chat["max_tokens"], chat["ignore_eos"], chat["stream_options"]) == (
        7,
        True,
        {"include_usage": True},
    )
    plain = body_of(RequestSpec("http://e", "m", stream=False, ignore_eos=False), Shape(2, 1))
    assert "stream_options" not in plain and "ignore_eos" not in plain and plain["prompt"] == "hello hello"
