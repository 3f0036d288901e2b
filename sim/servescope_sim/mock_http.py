"""The mock server's HTTP/1.1 front on asyncio streams: bounded, keep-alive, chunked for streams."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from servescope_sim.mock_server import (
    MAX_BODY_BYTES,
    MAX_HEAD_BYTES,
    BadRequestError,
    MockConfig,
    MockEngine,
    metrics_page,
    parse_completion,
    stream_events,
    token_count,
    whole_answer,
)

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 413: "Too Large"}
IDLE_SECONDS = 60.0  # a keep-alive connection with no next request this long is closed
MOCK_VERSION = "servescope-mock-1"  # what /version answers (vLLM answers its own version there)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: bytes
    keep_alive: bool


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request on the connection; None at its end; BadRequestError when malformed."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_SECONDS)
    except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
        return None
    except asyncio.LimitOverrunError:
        raise BadRequestError(f"request head over {MAX_HEAD_BYTES} bytes") from None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise BadRequestError(f"bad request line {lines[0][:80]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length_text = headers.get("content-length", "0")
    if not length_text.isdigit() or int(length_text) > MAX_BODY_BYTES:
        raise BadRequestError(f"content-length {length_text[:20]!r} is not 0..{MAX_BODY_BYTES}")
    body = await reader.readexactly(int(length_text)) if int(length_text) else b""
    keep_alive = headers.get("connection", "").lower() != "close"
    return Request(parts[0], parts[1].split("?", 1)[0], body, keep_alive)


def _head(status: int, content_type: str, length: int | None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: {content_type}\r\n"
        f"{framing}\r\n\r\n"
    ).encode()


async def _respond(writer: asyncio.StreamWriter, status: int, content_type: str, body: bytes) -> None:
    writer.write(_head(status, content_type, len(body)) + body)
    await writer.drain()


async def _stream(writer: asyncio.StreamWriter, events: AsyncIterator[bytes]) -> None:
    writer.write(_head(200, "text/event-stream", None))
    async for event in events:
        writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def answer(engine: MockEngine, request: Request, writer: asyncio.StreamWriter) -> None:
    """Route one request: completions, chat completions, /tokenize, /metrics, /health, /version,
    /v1/models."""
    routes = {"/v1/completions": False, "/v1/chat/completions": True}
    if request.path in routes:
        if request.method != "POST":
            await _respond(writer, 405, "text/plain", b"POST only\n")
            return
        completion = parse_completion(request.body, routes[request.path], engine.mock.tokens_per_word)
        engine.look_up_prefix(completion.prompt_digest, completion.prompt_tokens)
        if completion.stream:
            await _stream(writer, stream_events(engine, completion))
        else:
            await _respond(writer, 200, "application/json", await whole_answer(engine, completion))
    elif request.path == "/tokenize" and request.method == "POST":
        await _respond(
            writer, 200, "application/json", token_count(request.body, engine.mock.tokens_per_word)
        )
    elif request.path == "/metrics":
        await _respond(writer, 200, "text/plain; version=0.0.4", metrics_page(engine))
    elif request.path == "/health":
        await _respond(writer, 200, "text/plain", b"")
    elif request.path == "/version":
        await _respond(writer, 200, "application/json", f'{{"version": "{MOCK_VERSION}"}}'.encode())
    elif request.path == "/v1/models":
        body = f'{{"object": "list", "data": [{{"id": "{engine.mock.model}", "object": "model"}}]}}'
        await _respond(writer, 200, "application/json", body.encode())
    else:
        await _respond(writer, 404, "text/plain", b"not found\n")


def connection_handler(
    engine: MockEngine,
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], asyncio.Future[None]]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while True:
                try:
                    request = await read_request(reader)
                    if request is None:
                        break
                    await answer(engine, request, writer)
                except BadRequestError as exc:
                    await _respond(writer, 400, "text/plain", f"{exc}\n".encode())
                    break
                if not request.keep_alive:
                    break
        writer.close()

    return handle  # type: ignore[return-value]


async def serve(config: MockConfig, host: str, port: int, ready: Callable[[int], None]) -> None:
    """Serve until cancelled; `ready` is called with the bound port once listening."""
    engine = MockEngine(config)
    server = await asyncio.start_server(connection_handler(engine), host, port, limit=MAX_HEAD_BYTES)
    async with server:
        ready(server.sockets[0].getsockname()[1])
        await server.serve_forever()
