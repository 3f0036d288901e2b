"""`servescope load`: open- or closed-loop load against an OpenAI-compatible server.

`load mock-server`, a mock OpenAI server, is servescope-sim's: its entry point adds it here (cli.py)."""

from __future__ import annotations

import inspect
import json
from typing import Annotated, Any

import typer
from pydantic import BaseModel

from servescope.core.cli_errors import usage_error
from servescope.core.extensions import MissingDistributionError
from servescope.core.settings_cli import settings_command
from servescope.kit.load.client import RequestSpec
from servescope.kit.load.endpoint import listed_model
from servescope.kit.load.engine_metrics import metrics_url
from servescope.kit.load.metrics import LoadMetrics, serve_metrics
from servescope.kit.load.records import StepResult
from servescope.kit.load.runner import HttpStepRunner
from servescope.kit.load.settings import LoadSettings, OutputSettings, TargetSettings, WorkloadSettings
from servescope.kit.load.summary import render_text, summarise
from servescope.kit.load.token_fit import fit_to_engine
from servescope.kit.load.user_ids import UserIdSettings, attach_user_ids
from servescope.kit.load.validity import ValidityRules
from servescope.kit.load.workload import Workload

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


def workload_of(settings: WorkloadSettings) -> Workload:
    """The workload the settings describe; a usage error naming a bad dataset."""
    try:
        workload, skipped = settings.build()
    except ValueError as exc:
        usage_error(str(exc))
    if skipped:
        typer.echo(f"--dataset {settings.dataset}: {skipped} lines skipped (bad, or no reply)", err=True)
    return workload


def build_runner(
    target: TargetSettings, load: LoadSettings, output: OutputSettings, workload: WorkloadSettings
) -> HttpStepRunner:
    """The HTTP step runner the settings describe (shared by run and replay)."""
    model = target.model or first_model(target.url)
    requests, fitted = fit_to_engine(workload_of(workload), target.url, model)
    if fitted:
        typer.echo(fitted, err=True)
    spec = RequestSpec(
        target.url,
        model,
        workload.api,
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
        requests,
        load.mode,
        load.arrival,
        load.cv,
        load.max_in_flight,
        rules,
        metrics_url(target.url) if target.engine_metrics else None,
        metrics,
        load.warmup_s,
    )


# A step that is not a result exits with its own status: the client's fault, the engine's capacity, the
# engine's failure (1 and 2 are bad input).
EXIT_CODES = {"valid": 0, "client_bound": 3, "overloaded": 4, "engine_failed": 5}
EXIT_EPILOG = (
    "Exit status: 0 valid; 3 client_bound (the client could not keep the schedule: achieved < 98 % of "
    "offered, schedule lag p99 over --max-lag, or above 70 % of --ceiling); 4 overloaded (the engine's "
    "queue grew: the rate is above capacity); 5 engine_failed (most requests failed); 1 or 2 bad input."
)


def report(result: StepResult, output: OutputSettings) -> None:
    """Print the step; write its JSON summary; exit with the step's status when it is not valid."""
    summary = summarise(result)
    typer.echo(render_text(summary))
    if output.json_out is not None:
        output.json_out.write_text(json.dumps(summary, indent=2) + "\n")
    if not result.valid:
        raise typer.Exit(EXIT_CODES[result.status])


def _settings(
    models: dict[type[BaseModel], BaseModel],
) -> tuple[TargetSettings, LoadSettings, OutputSettings, WorkloadSettings]:
    target, load, output = models[TargetSettings], models[LoadSettings], models[OutputSettings]
    workload = models[WorkloadSettings]
    assert isinstance(target, TargetSettings) and isinstance(load, LoadSettings)
    assert isinstance(output, OutputSettings) and isinstance(workload, WorkloadSettings)
    return target, load, output, workload


SETTINGS: list[type[BaseModel]] = [TargetSettings, LoadSettings, WorkloadSettings, OutputSettings]


def _run(models: dict[type[BaseModel], BaseModel], _: dict[str, Any]) -> None:
    target, load, output, workload = _settings(models)
    runner = build_runner(target, load, output, workload)
    ids = attach_user_ids(runner, models[UserIdSettings], load.seed)
    offered = load.rate if load.mode == "open" else load.concurrency
    result = runner.run_step(offered, load.duration_s, seed=load.seed)
    if ids is not None:
        typer.echo(ids.summary())
    report(result, output)


app.command("run", epilog=EXIT_EPILOG)(
    settings_command(
        [*SETTINGS, UserIdSettings],
        _run,
        doc="Run one load step and report it, valid or not.\n\n"
        "Open loop (default): sends go out on a schedule precomputed from --seed (constant, Poisson or "
        "gamma arrivals); TTFT and e2e are measured from the scheduled time, and from the actual send "
        "beside them. Closed loop (--mode closed): --concurrency clients each wait for their answer, "
        "which hides queueing (coordinated omission); its output is labelled CLOSED LOOP.",
    )
)


def _option(name: str, default: Any, kind: Any, text: str) -> inspect.Parameter:
    flag = "--" + name.replace("_", "-")
    annotation = Annotated[kind, typer.Option(flag, help=text)]
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def _calibrate(models: dict[type[BaseModel], BaseModel], extra: dict[str, Any]) -> None:
    from servescope.kit.load.calibrate import calibrate

    workload = models[WorkloadSettings]
    assert isinstance(workload, WorkloadSettings)
    try:
        found = calibrate(
            extra["seconds"], shapes=workload_of(workload), api=workload.api, stream=extra["stream"]
        )
    except MissingDistributionError as exc:
        usage_error(str(exc), 2)
    except RuntimeError as exc:
        usage_error(str(exc), 1)
    typer.echo(found.line())


app.command("calibrate")(
    settings_command(
        [WorkloadSettings],
        _calibrate,
        extra=[
            _option("seconds", 3.0, float, "Seconds to measure."),
            _option("stream", True, bool, "Streamed requests (as `run` sends by default)."),
        ],
        doc="Measure this client's own ceiling (req/s) for one request shape against an instant local "
        "mock; pass it to --ceiling. `capacity run --url` and `tune` measure it themselves before their "
        "first step, with the requests they will send.",
    )
)


def _locust(models: dict[type[BaseModel], BaseModel], extra: dict[str, Any]) -> None:
    from servescope.kit.load.scaleout import LocustPlan, run_locust

    target, load, output, workload = _settings(models)
    plan = LocustPlan(
        target.url,
        target.model or first_model(target.url),
        load.rate,
        load.duration_s,
        extra["workers"],
        load.arrival,
        load.cv,
        load.seed,
        workload_of(workload),
        workload.api,
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
app.command("locust", epilog=EXIT_EPILOG)(
    settings_command(
        SETTINGS,
        _locust,
        extra=[WORKERS],
        doc="Run one open-loop step through a local Locust master and --workers workers.\n\n"
        "Each worker sends every N-th request of the one seeded schedule (streamed); the "
        "records are merged and judged by the same validity rules as `load run`; Locust's own merged "
        "histogram is quoted beside. Needs the `load` extra (locust, gevent), run as subprocesses.",
    )
)


def _replay(models: dict[type[BaseModel], BaseModel], extra: dict[str, Any]) -> None:
    from servescope.kit.load.replay import (
        PrometheusApi,
        ReplayError,
        read_profile,
        replay_schedule,
        replay_shapes,
    )

    target, load, output, workload = _settings(models)
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
    runner = build_runner(target, load, output, workload)
    runner.shapes, runner.mode = replay_shapes(profile, load.seed), "open"
    report(runner.run_schedule(times, duration, seed=load.seed), output)


REPLAY_OPTIONS = [
    _option("prometheus", "http://127.0.0.1:9090", str, "Prometheus that scraped the engines."),
    _option("start", 0.0, float, "Start of the range to replay, unix seconds."),
    _option("end", 0.0, float, "End of the range to replay, unix seconds."),
    _option("step", 60.0, float, "Seconds per point of the rate curve."),
    _option("selector", "", str, 'PromQL label matchers picking the engines, e.g. model_name="llama".'),
    _option("compress", 60.0, float, "Replay this many times faster (a day at 1440: one minute)."),
    _option("rate_scale", 1.0, float, "Multiply every rate of the curve (more or less load, same shape)."),
]
app.command("replay", epilog=EXIT_EPILOG)(
    settings_command(
        SETTINGS,
        _replay,
        extra=REPLAY_OPTIONS,
        doc="Replay a production traffic shape taken from Prometheus as an open-loop load.\n\n"
        "The arrival-rate curve is the rate of vllm:request_success_total over [--start, --end]; prompt and "
        "output lengths follow the vllm:request_prompt_tokens / vllm:request_generation_tokens histograms "
        "over the same range. Time runs --compress times faster; --rate-scale multiplies the rates. The "
        "step is judged by the same validity rules as `load run` (--rate and --mode are not used).",
    )
)
