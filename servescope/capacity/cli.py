"""`servescope capacity run` (find the knee, size the fleet) and `servescope capacity compare A B`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, cast

import typer

from servescope.capacity.compare import compare, describe
from servescope.capacity.report import capacity_html, capacity_markdown
from servescope.capacity.result import CapacityRun, build_run, load, save
from servescope.capacity.runners import checked_http_runner, parse_flags
from servescope.capacity.search import SearchPlan, find_knee
from servescope.capacity.sizing import provision
from servescope.capacity.steps import Slo
from servescope.load.records import LoopMode, StepRunner

app = typer.Typer(
    help="Capacity: the highest offered rate whose tail latency meets the SLO, the fleet to provision "
    "for a peak with headroom, and regression tests between two runs.",
    no_args_is_help=True,
)


@app.callback()
def capacity() -> None:
    """Find the knee (max QPS under the SLO), size a fleet, compare two runs."""


def _fail(message: str) -> typer.Exit:
    typer.echo(f"servescope: error: {message}", err=True)
    return typer.Exit(2)


def choose_runner(
    url: str | None, simulate: bool, flags: list[str], mode: LoopMode, warmup_s: float
) -> StepRunner:
    """The simulated engine (`--simulate`, imported only then) or the HTTP runner (`--url`)."""
    if simulate == (url is not None):
        raise ValueError("give exactly one of --simulate and --url")
    if url is not None:
        if flags:
            raise ValueError(
                "--set configures the simulated engine; restart a real one with `servescope tune`"
            )
        return checked_http_runner(url, mode)
    from servescope.sim.load_runner import EngineStartError, start_simulated  # only when asked for

    try:
        return start_simulated(parse_flags(flags), mode=mode, warmup_s=warmup_s)
    except EngineStartError as err:
        raise ValueError(f"the simulated engine did not start: {err}") from err


def write_reports(runs: list[CapacityRun], out: Path, title: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "capacity.md").write_text(capacity_markdown(runs, title), encoding="utf-8")
    (out / "capacity.html").write_text(capacity_html(runs, title), encoding="utf-8")
    save(runs[0], out / "capacity.json")


@app.command("run")
def run_command(
    # One option per knob of the search, the runner and the sizing: a long signature by nature.
    simulate: Annotated[
        bool, typer.Option("--simulate", help="Load the simulated engine (virtual clock).")
    ] = False,
    url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint to load over HTTP.")] = None,
    slo: Annotated[
        list[str] | None,
        typer.Option(help="metric:seconds, repeatable (ttft, e2e, itl, tpot); all must hold."),
    ] = None,
    quantile: Annotated[float, typer.Option(help="The SLO percentile, as a fraction.")] = 0.99,
    duration: Annotated[float, typer.Option(help="Measured seconds per load step.")] = 30.0,
    warmup: Annotated[float, typer.Option(help="Warm-up seconds before each step (simulated engine).")] = 5.0,
    repeats: Annotated[int, typer.Option(help="Searches with different seeds: the knee's interval.")] = 3,
    start_qps: Annotated[float, typer.Option(help="First offered rate; doubled until a step fails.")] = 1.0,
    max_qps: Annotated[float, typer.Option(help="Highest offered rate tried.")] = 1024.0,
    resolution: Annotated[
        float, typer.Option(help="Bisect until the bracket is this share of its top.")
    ] = 0.05,
    mode: Annotated[
        str, typer.Option(help="open (arrivals on a schedule) or closed (clients wait).")
    ] = "open",
    seed: Annotated[int, typer.Option(help="Seed of the first repeat.")] = 0,
    peak_qps: Annotated[float | None, typer.Option(help="Size the fleet for this peak rate.")] = None,
    buffer: Annotated[float, typer.Option(help="Headroom kept below the knee's lower bound.")] = 0.2,
    gpus_per_replica: Annotated[int, typer.Option(help="GPUs one engine replica uses.")] = 1,
    set_flag: Annotated[
        list[str] | None, typer.Option("--set", help="Simulated engine flag name=value, repeatable.")
    ] = None,
    label: Annotated[str, typer.Option(help="Name of this configuration in reports.")] = "baseline",
    out: Annotated[Path | None, typer.Option(help="Write capacity.json, .md and .html here.")] = None,
) -> None:
    """Find the knee: exponential bracket then bisection, a backlog test per step, repeats for an interval."""
    if mode not in ("open", "closed"):
        raise _fail(f"--mode must be open or closed, got {mode!r}")
    try:
        slos = tuple(Slo.parse(text, quantile) for text in (slo or ["ttft:0.5"]))
        plan = SearchPlan(slos, duration, repeats, start_qps, max_qps, resolution, seed)
        runner = choose_runner(url, simulate, set_flag or [], cast(LoopMode, mode), warmup)
    except ValueError as err:
        raise _fail(str(err)) from None
    knee = find_knee(
        runner,
        plan,
        on_step=lambda s: typer.echo(
            f"  {s.offered:8.3f} req/s seed {s.seed}: {'meets' if s.meets else 'misses'}"
            f"{' (backlog: ' + s.backlog + ')' if s.backlog else ''}",
            err=True,
        ),
    )
    sizing = None
    if peak_qps is not None:
        try:
            sizing = provision(peak_qps, knee.lower, buffer=buffer, gpus_per_replica=gpus_per_replica)
        except ValueError as err:
            raise _fail(str(err)) from None
    run = build_run(label, plan, knee, sizing)
    typer.echo(capacity_markdown([run], f"Capacity of {label}"))
    if out is not None:
        write_reports([run], out, f"Capacity of {label}")


@app.command("compare")
def compare_command(
    baseline: Annotated[Path, typer.Argument(help="capacity.json of the baseline run (A).")],
    candidate: Annotated[Path, typer.Argument(help="capacity.json of the run under test (B).")],
    alpha: Annotated[float, typer.Option(help="Significance level of the rank test.")] = 0.05,
    min_effect: Annotated[float, typer.Option(help="Smallest P99 rise counted as a regression.")] = 0.05,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 1000,
) -> None:
    """Exit 1 when B is a significant regression of A (tail latency or knee); for a weekly CI job."""
    try:
        result = compare(
            load(baseline), load(candidate), alpha=alpha, min_effect=min_effect, resamples=resamples
        )
    except ValueError as err:
        raise _fail(str(err)) from None
    typer.echo(describe(result))
    if result.regression:
        raise typer.Exit(1)
