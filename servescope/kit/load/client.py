"""One request to an OpenAI-compatible endpoint, timed; every failure becomes a reason, never a raise."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import aiohttp

from servescope.core.errors import ServescopeError
from servescope.kit.load.records import RequestRecord
from servescope.kit.load.schedule import Shape

Api = Literal["completions", "chat"]
PATHS: dict[Api, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
# How the output token count was known: the server's usage, the chunk count (no usage), or both
# known and different (the chunk count is then discarded and counted as a mismatch).
TokenSource = Literal["usage", "chunks", "mismatch", "none"]
Clock = Callable[[], float]


class RequestHooks(Protocol):
    """What a run adds to every request (a header) and reads from every answer (its headers)."""

    def headers(self) -> Mapping[str, str]: ...

    def answered(self, sent: Mapping[str, str], received: Mapping[str, str]) -> None: ...


@dataclass(frozen=True)
class RequestSpec:
    """What every request of a run asks for."""

    base_url: str
    model: str
    api: Api = "completions"
    stream: bool = True
    ignore_eos: bool = True
    timeout_s: float = 30.0
    # vLLM's `priority` request field, sent only when the engine schedules by priority (a field it
    # otherwise refuses): the prompt's length, so shorter prompts go first (lower is served earlier).
    priority: bool = False


def prompt_text(tokens: int) -> str:
    """A prompt of about `tokens` tokens for any BPE tokenizer: one short common word per token."""
    return " ".join(["hello"] * max(1, tokens))


def body_of(spec: RequestSpec, shape: Shape) -> dict[str, Any]:
    body: dict[str, Any] = {"model": spec.model, "max_tokens": shape.output_tokens, "stream": spec.stream}
    text = shape.prompt or prompt_text(shape.prompt_tokens)
    if spec.api == "chat":
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    if spec.priority:
        body["priority"] = shape.prompt_tokens
    if spec.ignore_eos:
        body["ignore_eos"] = True  # vLLM's extension; other servers ignore the unknown field
    if spec.stream:
        body["stream_options"] = {"include_usage": True}
    return body


def _content(chunk: dict[str, Any]) -> str:
    choices = chunk.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    choice = choices[0]
    delta = choice.get("delta") or choice.get("message")
    text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    return text if isinstance(text, str) else ""


@dataclass
class _Progress:
    first_token_s: float | None = None
    last_content_s: float | None = None
    gaps: list[float] = field(default_factory=list)
    chunks: int = 0
    prompt_tokens: int = 0
    usage_tokens: int | None = None


def _take(progress: _Progress, chunk: dict[str, Any], now: float) -> None:
    # Every chunk with a choice is one step's tokens (its text may be empty: a partial UTF-8 sequence,
    # or the closing chunk); TTFT waits for the first chunk with text, what a user sees first.
    if chunk.get("choices"):
        progress.chunks += 1
    if _content(chunk):
        if progress.first_token_s is None:
            progress.first_token_s = now
        elif progress.last_content_s is not None:
            progress.gaps.append(now - progress.last_content_s)
        progress.last_content_s = now
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        progress.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        progress.usage_tokens = int(usage.get("completion_tokens") or 0)


def _tokens(progress: _Progress, streamed: bool) -> tuple[int, TokenSource]:
    if progress.usage_tokens is None:
        return (progress.chunks, "chunks") if streamed else (0, "none")
    if streamed and progress.chunks != progress.usage_tokens:
        return progress.usage_tokens, "mismatch"
    return progress.usage_tokens, "usage"


async def _stream(response: aiohttp.ClientResponse, progress: _Progress, clock: Clock) -> None:
    # Read to the body's end (past [DONE]), so the connection goes back to the pool: a body left
    # unread closes it, and the next request would pay for a new connection.
    async for raw in response.content:
        if not raw.startswith(b"data:"):
            continue
        data = raw[5:].strip()
        if data == b"[DONE]":
            continue
        chunk = json.loads(data)
        if isinstance(chunk, dict):
            _take(progress, chunk, clock())


async def send(
    client: aiohttp.ClientSession,
    spec: RequestSpec,
    shape: Shape,
    scheduled_s: float,
    clock: Clock,
    *,
    hooks: RequestHooks | None = None,
) -> tuple[RequestRecord, TokenSource]:
    """Send one request now; its record (times from `clock`, the step's clock) and the token source."""
    # One piece: every way a request can end is caught here and becomes its record's reason.
    sent_s = clock()
    progress = _Progress()
    error: str | None = None
    try:
        async with asyncio.timeout(spec.timeout_s):
            await _exchange(client, spec, shape, progress, clock=clock, hooks=hooks)
    except TimeoutError:
        error = "timeout"
    except _HttpStatusError as exc:
        error = f"http_{exc.status}"
    except aiohttp.ClientConnectorError:
        error = "connect"
    except aiohttp.ClientError:
        error = "protocol"
    except (ValueError, TypeError):  # a body that is not the JSON the API promises
        error = "bad_response"
    done_s = clock()
    if error is None and progress.first_token_s is None:
        error = "no_content"
    tokens, source = _tokens(progress, spec.stream)
    record = RequestRecord(
        scheduled_s=scheduled_s,
        sent_s=sent_s,
        first_token_s=progress.first_token_s,
        done_s=done_s if error is None else None,
        prompt_tokens=progress.prompt_tokens or shape.prompt_tokens,
        output_tokens=tokens,
        error=error,
        chunk_gaps=tuple(progress.gaps),
    )
    return record, source


class _HttpStatusError(ServescopeError):
    reason = "http_status"

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


async def _exchange(
    client: aiohttp.ClientSession,
    spec: RequestSpec,
    shape: Shape,
    progress: _Progress,
    *,
    clock: Clock,
    hooks: RequestHooks | None,
) -> None:
    url = spec.base_url.rstrip("/") + PATHS[spec.api]
    headers = dict(hooks.headers()) if hooks is not None else None
    async with client.post(url, json=body_of(spec, shape), headers=headers) as response:
        if hooks is not None:
            hooks.answered(headers or {}, response.headers)
        if response.status != 200:
            await response.read()
            raise _HttpStatusError(response.status)
        if spec.stream:
            await _stream(response, progress, clock)
            return
        body = json.loads(await response.read())
        if not isinstance(body, dict):
            raise ValueError("response body is not a JSON object")
        # Without streaming the first token arrives with the last: TTFT is the whole answer.
        _take(progress, body, clock())


def new_client(max_in_flight: int) -> aiohttp.ClientSession:
    """One pooled session with a connection per in-flight request, so the pool never queues silently.

    aiohttp, as `vllm bench serve` uses: its connection pool costs the same at any number of idle
    connections (httpx's walks them all for every request), which is most of a client's CPU at a few
    hundred requests per second. Each request has its own deadline (`RequestSpec.timeout_s`).
    """
    connector = aiohttp.TCPConnector(limit=max_in_flight, limit_per_host=max_in_flight, ttl_dns_cache=300)
    return aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None), trust_env=False
    )


def now_from(start: float) -> Clock:
    """A clock in seconds since `start` (a perf_counter reading): the step's clock."""
    return lambda: time.perf_counter() - start
