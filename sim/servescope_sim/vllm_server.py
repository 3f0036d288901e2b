"""One simulated vLLM engine behind HTTP: `/metrics`, `/health`, `/v1/models`, and `/control` for scenarios.

Run as `python -m servescope_sim.vllm_server --listen 127.0.0.1:0`; the first stdout line names the port.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from servescope.core.errors import validation_message
from servescope.core.listen import ListenError, bind, bound_address, parse_listen
from servescope_sim.vllm_engine import EngineConfig, SimulatedEngine
from servescope_sim.vllm_metrics import CONTENT_TYPE, GENERATIONS, Generation, render_metrics

# Stepping in the background keeps each scrape's catch-up short, however rarely it comes.
TICK_SECONDS = 1.0


class Control(BaseModel):
    """A change of load or state; fields left out keep their value."""

    model_config = ConfigDict(extra="forbid")

    # Upper bounds keep one request from making the simulator step for minutes.
    arrival_rate: float | None = Field(None, ge=0, le=10_000, description="Poisson requests per second.")
    max_num_seqs: int | None = Field(None, ge=1, description="Most sequences in one batch.")
    prompt_tokens: int | None = Field(None, ge=1, description="Mean prompt length in tokens.")
    output_tokens: int | None = Field(None, ge=1, description="Mean output length in tokens.")
    concurrency: int | None = Field(None, ge=0, le=100_000, description="Closed-loop clients.")
    down: bool | None = Field(None, description="Kill (true) or restart (false) the engine.")
    prefill_factor: float | None = Field(
        None, ge=0.01, le=100, description="How many times slower than the model's prefill is (a build's)."
    )


def settings(engine: SimulatedEngine) -> dict[str, Any]:
    """The controllable settings, as `/control` reports them."""
    c = engine.config
    return {
        "arrival_rate": c.arrival_rate,
        "max_num_seqs": c.max_num_seqs,
        "prompt_tokens": c.prompt_tokens,
        "output_tokens": c.output_tokens,
        "concurrency": c.concurrency,
        "prefill_factor": c.prefill_factor,
        "down": engine.down,
    }


def _unavailable() -> Response:
    return JSONResponse({"error": "the engine is down"}, status_code=503)


def _body_location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc if part != "body") or "body (a JSON object)"


def _lifespan(
    engine: SimulatedEngine, clock: Callable[[], float], parent: int | None = None
) -> Callable[[FastAPI], Any]:
    async def tick() -> None:
        while True:
            engine.advance_to(clock())
            if parent is not None and os.getppid() != parent:
                # The process that started this engine is gone (even SIGKILLed): do not outlive it.
                os.kill(os.getpid(), signal.SIGTERM)
                return
            await asyncio.sleep(TICK_SECONDS)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(tick())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    return lifespan


def _add_vllm_routes(
    app: FastAPI, engine: SimulatedEngine, generation: Generation, clock: Callable[[], float]
) -> None:
    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        engine.advance_to(clock())
        if engine.down:
            return _unavailable()
        return Response(render_metrics(engine, generation), media_type=CONTENT_TYPE)

    @app.get("/health")
    async def health() -> Response:
        return _unavailable() if engine.down else Response(status_code=200)

    @app.get("/v1/models")
    async def models() -> Response:
        if engine.down:
            return _unavailable()
        model = {"id": engine.model_name, "object": "model", "created": int(engine.stats.created)}
        model |= {"owned_by": "vllm", "root": engine.model_name, "parent": None}
        return JSONResponse(
            {"object": "list", "data": [{**model, "max_model_len": engine.config.max_model_len}]}
        )


def _add_control_routes(app: FastAPI, engine: SimulatedEngine, clock: Callable[[], float]) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": validation_message(exc, _body_location)}, status_code=422)

    @app.get("/control")
    async def current() -> dict[str, Any]:
        return settings(engine)

    @app.post("/control")
    async def control(change: Control) -> Response:
        engine.advance_to(clock())  # changes apply from now, not from the last scrape
        try:
            engine.set_load(**change.model_dump(exclude_none=True, exclude={"down"}))
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=422)
        if change.down is not None:
            engine.set_down(change.down)
        return JSONResponse(settings(engine))


def create_app(
    engine: SimulatedEngine, generation: Generation, clock: Callable[[], float], parent: int | None = None
) -> FastAPI:
    """The HTTP face of one engine; `clock` gives the engine's time (time.monotonic in production).
    With `parent`, the engine stops when its parent process changes (the one that started it died)."""
    app = FastAPI(title="sim-vllm", lifespan=_lifespan(engine, clock, parent))
    _add_vllm_routes(app, engine, generation, clock)
    _add_control_routes(app, engine, clock)
    return app


# The EngineConfig fields the command line sets: (field, type, help); their defaults are EngineConfig's.
_ENGINE_OPTIONS: tuple[tuple[str, type, str], ...] = (
    ("arrival_rate", float, "Poisson requests per second"),
    ("max_num_seqs", int, "requests the engine runs at once"),
    ("prompt_tokens", int, "mean prompt length"),
    ("output_tokens", int, "mean output length"),
    ("num_gpu_blocks", int, "KV cache blocks"),
    ("block_size", int, "tokens per KV cache block"),
)
_ENGINE_DEFAULTS = EngineConfig()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sim-vllm", description="Serve one simulated vLLM engine.")
    parser.add_argument("--listen", default="127.0.0.1:8000", help="HOST:PORT; port 0 picks a free one")
    parser.add_argument("--model-name", default="sim-llm", help="the model_name label and /v1/models id")
    parser.add_argument("--engine", default="0", help="data-parallel index: the engine label")
    parser.add_argument("--seed", type=int, default=0)
    for name, kind, text in _ENGINE_OPTIONS:
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=kind, default=getattr(_ENGINE_DEFAULTS, name), help=text)
    parser.add_argument("--generation", choices=GENERATIONS, default="current", help="metric names")
    parser.add_argument(
        "--exit-with-parent", action="store_true", help="stop when the process that started this one exits"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse options, bind, print the address line, serve until SIGTERM or SIGINT."""
    import uvicorn

    parser = _parser()
    args = parser.parse_args(argv)
    try:
        config = EngineConfig(**{name: getattr(args, name) for name, _, _ in _ENGINE_OPTIONS})
        sock = bind(parse_listen(args.listen))
    except (ValueError, ListenError) as exc:
        parser.error(str(exc))
    engine = SimulatedEngine(
        config,
        seed=args.seed,
        model_name=args.model_name,
        engine_id=args.engine,
        start=time.monotonic(),
        wall_start=time.time(),
    )
    print(f"sim-vllm serving on {bound_address(sock)}", flush=True)
    parent = os.getppid() if args.exit_with_parent else None
    app = create_app(engine, args.generation, time.monotonic, parent)
    server_config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=3)
    uvicorn.Server(server_config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
