"""`servescope load`: open- or closed-loop load against an OpenAI-compatible server, and its mock."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from typing import Annotated, Any

import typer
from pydantic import BaseModel

from servescope.common.listen import ListenError, parse_listen
from servescope.common.settings_cli import settings_command, usage_error
from servescope.load.client import RequestSpec
from servescope.load.endpoint import listed_model
from servescope.load.engine_metrics import metrics_url
from servescope.load.metrics import LoadMetrics, serve_metrics
from servescope.load.mock_server import MockConfig
from servescope.load.records import StepResult
from servescope.load.runner import HttpStepRunner
from servescope.load.schedule import LengthDistribution, ShapeList, read_shapes
from servescope.load.settings import LoadSettings, OutputSettings, TargetSettings
from servescope.load.summary import render_text, summarise
from servescope.load.user_ids import UserIdSettings, attach_user_ids
from servescope.load.validity import CEILING_FRACTION, ValidityRules

app = typer.Typer(
    help="Load tests against an OpenAI-compatible endpoint (vLLM): open-loop arrivals on a precomputed "
    "schedule with latency from the scheduled time (closed loop only when asked, and labelled), "
    "validity rules, the engine's own /metrics sampled beside the client's view.",
    no_args_is_help=True,
)


def first_model(base_url: str) -> str:
    """The first model the server lists at /v1/models; a usage error naming the URL otherwise."""
    try:
        return listed_model(base_url)
    except ValueError as exc:
        usage_error(f"{exc}; pass --model", 1)


def build_runner(target: TargetSettings, load: LoadSettings, output: OutputSettings) -> HttpStepRunner:
    """The HTTP step runner the settings describe (shared by run, replay and capacity)."""
    shapes: LengthDistribution | ShapeList = LengthDistribution(
        load.prompt_tokens, load.output_tokens, load.spread
    )
    if load.shapes is not None:
        try:
            shapes, bad = read_shapes(load.shapes)
        except (OSError, ValueError) as exc:
            usage_error(f"--shapes {load.shapes}: {exc}")
        if bad:
            typer.echo(f"--shapes {load.shapes}: {bad} bad lines skipped", err=True)
    spec = RequestSpec(
        target.url,
        target.model or first_model(target.url),
        target.api,
        target.stream,
        target.ignore_eos,
        target.timeout_s,
    )
    rules = ValidityRules(max_lag_p99_s=load.max_lag_s, client_ceiling=output.ceiling)
    metrics = LoadMetrics()
    if output.metrics_port:
        serve_metrics(metrics, output.metrics_port)
    return HttpStepRunner(
        spec,
        shapes,
        load.mode,
        load.arrival,
        load.cv,
        load.max_in_flight,
        rules,
        metrics_url(target.url) if target.engine_metrics else None,
        metrics,
    )


def report(result: StepResult, output: OutputSettings) -> None:
    """Print the step; write its JSON summary; exit 3 when the step is invalid (not a result)."""
    summary = summarise(result)
    typer.echo(render_text(summary))
    if output.json_out is not None:
        output.json_out.write_text(json.dumps(summary, indent=2) + "\n")
    if not result.valid:
        raise typer.Exit(3)


def _run(models: dict[type[BaseModel], BaseModel], _: dict[str, Any]) -> None:
    target, load, output = models[TargetSettings], models[LoadSettings], models[OutputSettings]
    assert isinstance(target, TargetSettings) and isinstance(load, LoadSettings)
    assert isinstance(output, OutputSettings)
    runner = build_runner(target, load, output)
    ids = attach_user_ids(runner, models[UserIdSettings], load.seed)
    offered = load.rate if load.mode == "open" else load.concurrency
    result = runner.run_step(offered, load.duration_s, seed=load.seed)
    if ids is not None:
        typer.echo(ids.summary())
    report(result, output)


app.command(
    "run",
    epilog="Exit status: 0 valid, 3 invalid (achieved < 98 % of offered, schedule lag p99 over --max-lag, "
    "a growing backlog, or above 70 % of --ceiling), 1 or 2 bad input.",
)(
    settings_command(
        [TargetSettings, LoadSettings, OutputSettings, UserIdSettings],
        _run,
        doc="Run one load step and report it, valid or not.\n\n"
        "Open loop (default): sends go out on a schedule precomputed from --seed (constant, Poisson or "
        "gamma arrivals); TTFT and e2e are measured from the scheduled time, and from the actual send "
        "beside them. Closed loop (--mode closed): --concurrency clients each wait for their answer, "
        "which hides queueing (coordinated omission); its output is labelled CLOSED LOOP.",
    )
)


@app.command("mock-server")
def mock_server(
    listen: Annotated[str, typer.Option(help="host:port to listen on (port 0: a free one, printed).")] = (
        "127.0.0.1:8000"
    ),
    slots: Annotated[int, typer.Option(min=1, max=100_000, help="Requests served at once; more wait.")] = 8,
    ttft: Annotated[float, typer.Option(min=0, max=60, help="Seconds from slot to first token.")] = 0.02,
    token_delay: Annotated[float, typer.Option(min=0, max=10, help="Seconds per further token.")] = 0.005,
    model: Annotated[str, typer.Option(help="Model name it answers as.")] = "mock",
) -> None:
    """A mock OpenAI server that queues like an engine, with vLLM's metric names on /metrics."""
    from servescope.load.mock_http import serve

    try:
        address = parse_listen(listen)
    except ListenError as exc:
        usage_error(f"--listen {listen}: {exc}")
    config = MockConfig(slots=slots, ttft_s=ttft, token_s=token_delay, model=model)

    def ready(port: int) -> None:
        typer.echo(f"mock OpenAI server on {address.host}:{port} ({slots} slots)")

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(config, address.host, address.port, ready))


@app.command("calibrate")
def calibrate_command(
    seconds: Annotated[float, typer.Option(min=0.5, max=120, help="Seconds to measure.")] = 3.0,
    stream: Annotated[bool, typer.Option(help="Streamed requests (as `run` sends by default).")] = True,
    output_tokens: Annotated[int, typer.Option(min=1, max=4096, help="Tokens per answer.")] = 8,
) -> None:
    """Measure this client's own ceiling (req/s) against an instant local mock; pass it to --ceiling."""
    from servescope.load.calibrate import calibrate

    try:
        ceiling = calibrate(seconds, stream=stream, output_tokens=output_tokens)
    except RuntimeError as exc:
        usage_error(str(exc), 1)
    refused = CEILING_FRACTION * ceiling
    typer.echo(f"client ceiling {ceiling:.1f} req/s; results above {refused:.1f} req/s are refused")


def _locust(models: dict[type[BaseModel], BaseModel], extra: dict[str, Any]) -> None:
    from servescope.load.scaleout import LocustPlan, run_locust

    target, load, output = models[TargetSettings], models[LoadSettings], models[OutputSettings]
    assert isinstance(target, TargetSettings) and isinstance(load, LoadSettings)
    assert isinstance(output, OutputSettings)
    plan = LocustPlan(
        target.url,
        target.model or first_model(target.url),
        load.rate,
        load.duration_s,
        extra["workers"],
        load.arrival,
        load.cv,
        load.seed,
        load.prompt_tokens,
        load.output_tokens,
        target.timeout_s,
    )
    rules = ValidityRules(max_lag_p99_s=load.max_lag_s, client_ceiling=output.ceiling)
    try:
        result = run_locust(plan, rules)
    except RuntimeError as exc:
        usage_error(str(exc), 1)
    report(result, output)


WORKERS = inspect.Parameter(
    "workers",
    inspect.Parameter.KEYWORD_ONLY,
    default=2,
    annotation=Annotated[int, typer.Option(min=1, max=64, help="Locust worker processes on this machine.")],
)
app.command("locust")(
    settings_command(
        [TargetSettings, LoadSettings, OutputSettings],
        _locust,
        extra=[WORKERS],
        doc="Run one open-loop step through a local Locust master and --workers workers.\n\n"
        "Each worker sends every N-th request of the one seeded schedule (streamed /v1/completions); the "
        "records are merged and judged by the same validity rules as `load run`; Locust's own merged "
        "histogram is quoted beside. Needs the `load` extra (locust, gevent), run as subprocesses.",
    )
)


def _replay(models: dict[type[BaseModel], BaseModel], extra: dict[str, Any]) -> None:
    from servescope.load.replay import (
        PrometheusApi,
        ReplayError,
        read_profile,
        replay_schedule,
        replay_shapes,
    )

    target, load, output = models[TargetSettings], models[LoadSettings], models[OutputSettings]
    assert isinstance(target, TargetSettings) and isinstance(load, LoadSettings)
    assert isinstance(output, OutputSettings)
    try:
        profile = read_profile(
            PrometheusApi(extra["prometheus"]), extra["start"], extra["end"], extra["step"], extra["selector"]
        )
        times, duration = replay_schedule(
            profile, compress=extra["compress"], rate_scale=extra["rate_scale"], seed=load.seed
        )
    except (ReplayError, ValueError) as exc:
        usage_error(str(exc), 1)
    peak = max(rate for _, rate in profile.curve)
    typer.echo(
        f"replaying {profile.duration_s:.0f} s of traffic (peak {peak:.2f} req/s) in {duration:.1f} s: "
        f"{len(times)} requests, rates x{extra['rate_scale']:g}"
    )
    runner = build_runner(target, load, output)
    runner.shapes, runner.mode = replay_shapes(profile, load.seed), "open"
    report(runner.run_schedule(times, duration, seed=load.seed), output)


def _option(name: str, default: Any, kind: Any, text: str) -> inspect.Parameter:
    flag = "--" + name.replace("_", "-")
    annotation = Annotated[kind, typer.Option(flag, help=text)]
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


REPLAY_OPTIONS = [
    _option("prometheus", "http://127.0.0.1:9090", str, "Prometheus that scraped the engines."),
    _option("start", 0.0, float, "Start of the range to replay, unix seconds."),
    _option("end", 0.0, float, "End of the range to replay, unix seconds."),
    _option("step", 60.0, float, "Seconds per point of the rate curve."),
    _option("selector", "", str, 'PromQL label matchers picking the engines, e.g. model_name="llama".'),
    _option("compress", 60.0, float, "Replay this many times faster (a day at 1440: one minute)."),
    _option("rate_scale", 1.0, float, "Multiply every rate of the curve (more or less load, same shape)."),
]
app.command("replay")(
    settings_command(
        [TargetSettings, LoadSettings, OutputSettings],
        _replay,
        extra=REPLAY_OPTIONS,
        doc="Replay a production traffic shape taken from Prometheus as an open-loop load.\n\n"
        "The arrival-rate curve is the rate of vllm:request_success_total over [--start, --end]; prompt and "
        "output lengths follow the vllm:request_prompt_tokens / vllm:request_generation_tokens histograms "
        "over the same range. Time runs --compress times faster; --rate-scale multiplies the rates. The "
        "step is judged by the same validity rules as `load run` (--rate and --mode are not used).",
    )
)
