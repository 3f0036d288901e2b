"""`servescope load mock-server`, added to `servescope load` by servescope-sim's entry point."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

import typer

from servescope.core.listen import ListenError, parse_listen
from servescope.core.settings_cli import usage_error
from servescope_sim.mock_server import MockConfig


def mock_server(
    *,
    listen: Annotated[str, typer.Option(help="host:port to listen on (port 0: a free one, printed).")] = (
        "127.0.0.1:8000"
    ),
    slots: Annotated[int, typer.Option(min=1, max=100_000, help="Requests served at once; more wait.")] = 8,
    ttft: Annotated[float, typer.Option(min=0, max=60, help="Seconds from slot to first token.")] = 0.02,
    token_delay: Annotated[float, typer.Option(min=0, max=10, help="Seconds per further token.")] = 0.005,
    model: Annotated[str, typer.Option(help="Model name it answers as.")] = "mock",
    tokens_per_word: Annotated[
        int,
        typer.Option(
            min=1, max=16, help="Tokens its tokenizer makes of a prompt's word (/tokenize says so)."
        ),
    ] = 1,
) -> None:
    """A mock OpenAI server that queues like an engine, with vLLM's metric names on /metrics."""
    from servescope_sim.mock_http import serve

    try:
        address = parse_listen(listen)
    except ListenError as exc:
        usage_error(f"--listen {listen}: {exc}")
    config = MockConfig(slots, ttft, token_delay, model, tokens_per_word)

    def ready(port: int) -> None:
        typer.echo(f"mock OpenAI server on {address.host}:{port} ({slots} slots)")

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(config, address.host, address.port, ready))
