"""`servescope capacity run` (find the knee, size the fleet) and `servescope capacity compare A B`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, cast

import typer
from pydantic import BaseModel

from servescope.core.cli_group import command_group
from servescope.core.errors import ServescopeError
from servescope.core.extensions import MissingDistributionError
from servescope.core.settings_cli import settings_command, usage_error
from servescope.kit.capacity.compare import compare, describe
from servescope.kit.capacity.report import capacity_html, capacity_markdown
from servescope.kit.capacity.result import CapacityRun, build_run, load, save
from servescope.kit.capacity.runners import checked_http_runner, parse_flags, simulated_engine
from servescope.kit.capacity.search import SearchPlan, find_knee
from servescope.kit.capacity.settings import CapacityRunSettings
from servescope.kit.capacity.sizing import provision
from servescope.kit.capacity.steps import Slo, StepSummary
from servescope.kit.load.records import LoopMode, StepRunner

app = command_group(
    "Capacity: the highest offered rate whose tail latency meets the SLO, the fleet to provision "
    "for a peak with headroom, and regression tests between two runs."
)


def choose_runner(
    url: str | None, simulate: bool, flags: list[str], mode: LoopMode, warmup_s: float
) -> StepRunner:
    """The simulated engine (`--simulate`: servescope-sim, loaded only then) or the HTTP runner (--url)."""
    if simulate == (url is not None):
        raise ValueError("give exactly one of --simulate and --url")
    if url is not None:
        if flags:
            raise ValueError(
                "--set configures the simulated engine; restart a real one with `servescope tune`"
            )
        return checked_http_runner(url, mode)
    start_simulated = simulated_engine("`servescope capacity run --simulate`")
    try:
        return start_simulated(parse_flags(flags), mode=mode, warmup_s=warmup_s)
    except ServescopeError as err:
        raise ValueError(f"the simulated engine did not start: {err}") from err


def write_reports(runs: list[CapacityRun], out: Path, title: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "capacity.md").write_text(capacity_markdown(runs, title), encoding="utf-8")
    (out / "capacity.html").write_text(capacity_html(runs, title), encoding="utf-8")
    save(runs[0], out / "capacity.json")


def _echo_step(step: StepSummary) -> None:
    backlog = f" (backlog: {step.backlog})" if step.backlog else ""
    verdict = "meets" if step.meets else "misses"
    typer.echo(f"  {step.offered:8.3f} req/s seed {step.seed}: {verdict}{backlog}", err=True)


def _run(models: dict[type[BaseModel], BaseModel], _: dict[str, Any]) -> None:
    run = models[CapacityRunSettings]
    assert isinstance(run, CapacityRunSettings)
    if run.mode not in ("open", "closed"):
        usage_error(f"--mode must be open or closed, got {run.mode!r}")
    try:
        slos = tuple(Slo.parse(text, run.quantile) for text in (run.slo or ["ttft:0.5"]))
        plan = SearchPlan(
            slos, run.duration, run.repeats, run.start_qps, run.max_qps, run.resolution, run.seed
        )
        runner = choose_runner(
            run.url, run.simulate, run.set_flag or [], cast(LoopMode, run.mode), run.warmup
        )
    except (ValueError, MissingDistributionError) as err:
        usage_error(str(err))
    knee = find_knee(runner, plan, on_step=_echo_step)
    sizing = None
    if run.peak_qps is not None:
        try:
            sizing = provision(
                run.peak_qps, knee.lower, buffer=run.buffer, gpus_per_replica=run.gpus_per_replica
            )
        except ValueError as err:
            usage_error(str(err))
    result = build_run(run.label, plan, knee, sizing)
    typer.echo(capacity_markdown([result], f"Capacity of {run.label}"))
    if run.out is not None:
        write_reports([result], run.out, f"Capacity of {run.label}")


app.command("run")(
    settings_command(
        [CapacityRunSettings],
        _run,
        doc="Find the knee: exponential bracket then bisection, a backlog test per step, repeats for an "
        "interval.",
    )
)


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
        usage_error(str(err))
    typer.echo(describe(result))
    if result.regression:
        raise typer.Exit(1)
