"""`servescope capacity run` (find the knee, size the fleet), `capacity compare A B` and `capacity weekly`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel

from servescope.capacity.compare import DEFAULT_DROP, IncompatibleRunsError, compare, describe
from servescope.capacity.launch import Prepared, check_choice, prepare_http, search_plan
from servescope.capacity.report import capacity_html, capacity_markdown
from servescope.capacity.result import CapacityRun, Provenance, build_run, load, save
from servescope.capacity.runners import parse_flags
from servescope.capacity.search import KneeStatus, find_knee
from servescope.capacity.settings import CapacityRunSettings
from servescope.capacity.sizing import provision
from servescope.capacity.steps import StepSummary
from servescope.common.cli_group import command_group
from servescope.common.settings_cli import settings_command, usage_error
from servescope.load.settings import WorkloadSettings

app = command_group(
    "Capacity: the highest offered rate whose tail latency meets the SLO (with a confidence interval, or "
    "an honest reason why none was measured), the fleet to provision for a peak with headroom, and "
    "regression tests between two runs."
)
# The status of a search is its exit status too (1 and 2 are errors and bad input).
EXIT_CODES: dict[KneeStatus, int] = {"measured": 0, "client_bound": 3, "not_reached": 4, "engine_failed": 5}
RUN_EPILOG = (
    "Exit status: 0 measured (a knee with its interval); 3 client_bound (the client could not drive a "
    "step even when measured again: the report says up to which rate it could, why, and what to do); "
    "4 not_reached (the first step already misses, or none up to --max-qps does); 5 engine_failed (most "
    "requests of a step failed); 1 or 2 bad input. The report is written in every case."
)


def prepare_simulated(run: CapacityRunSettings) -> Prepared:
    """The simulated engine (imported only when asked for) with the run's flags."""
    from servescope.sim.load_runner import EngineStartError, start_simulated

    mode = check_choice(run)
    plan = search_plan(run)
    try:
        runner = start_simulated(parse_flags(run.set_flag or []), mode=mode, warmup_s=run.warmup)
    except EngineStartError as err:
        raise ValueError(f"the simulated engine did not start: {err}") from err
    workload = {"kind": "simulated engine"}
    provenance = Provenance("simulated", "simulated", "simulated", "simulated", workload, Provenance.now())
    return Prepared(plan, runner, provenance)


def write_reports(runs: list[CapacityRun], out: Path, title: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "capacity.md").write_text(capacity_markdown(runs, title), encoding="utf-8")
    (out / "capacity.html").write_text(capacity_html(runs, title), encoding="utf-8")
    save(runs[0], out / "capacity.json")


def say(line: str) -> None:
    typer.echo(line, err=True)


def echo_step(step: StepSummary) -> None:
    """One line per step as it ends: rate, verdict, the SLO quantiles with their intervals, the client."""
    figures = ", ".join(
        f"{key} {step.percentiles[key]:.3g} s [{low:.3g}, {high:.3g}]"
        for key, (low, high) in step.intervals.items()
    )
    why = f" ({step.status}: {step.reason})" if step.reason else ""
    engine = "" if step.engine_tokens is None else f" (engine {step.engine_tokens:.0f})"
    typer.echo(
        f"  {step.offered:8.3f} req/s seed {step.seed}: {step.verdict}{why}; {figures}; {step.requests} "
        f"requests in {step.duration_s:.0f} s; {step.throughput_tokens:.0f} tokens/s{engine}; lag p99 "
        f"{step.lag_p99_s * 1000:.0f} ms",
        err=True,
    )


def measure(run: CapacityRunSettings, prepared: Prepared) -> CapacityRun:
    """Search the knee, size the fleet when there is a knee, and keep it all with its provenance."""
    knee = find_knee(
        prepared.runner, prepared.plan, on_step=echo_step, progress=say, fallback=prepared.fallback
    )
    sizing = None
    if run.peak_qps is not None and knee.status == "measured" and knee.lower > 0:
        try:
            sizing = provision(
                run.peak_qps, knee.lower, buffer=run.buffer, gpus_per_replica=run.gpus_per_replica
            )
        except ValueError as err:
            usage_error(str(err))
    elif run.peak_qps is not None:
        say(f"no fleet sized for {run.peak_qps:g} req/s: {knee.message}")
    return build_run(run.label, prepared.plan, knee, sizing, prepared.provenance)


def _run(models: dict[type[BaseModel], BaseModel], _: dict[str, Any]) -> None:
    run, workload = models[CapacityRunSettings], models[WorkloadSettings]
    assert isinstance(run, CapacityRunSettings) and isinstance(workload, WorkloadSettings)
    try:
        prepared = prepare_simulated(run) if run.simulate else prepare_http(run, workload, say)
    except ValueError as err:
        usage_error(str(err))
    except RuntimeError as err:
        usage_error(f"the client's calibration failed: {err}", 1)
    result = measure(run, prepared)
    typer.echo(capacity_markdown([result], f"Capacity of {run.label}"))
    if run.out is not None:
        write_reports([result], run.out, f"Capacity of {run.label}")
    raise typer.Exit(EXIT_CODES[result.knee.status])


app.command("run", epilog=RUN_EPILOG)(
    settings_command(
        [CapacityRunSettings, WorkloadSettings],
        _run,
        doc="Find the knee: an exponential bracket, then bisection with steps extended until their "
        "quantile's confidence interval excludes the bound; the interval of the knee is the highest "
        "decided pass and the lowest decided miss. The report's first line is its status.",
    )
)


@app.command("compare")
def compare_command(
    baseline: Annotated[Path, typer.Argument(help="capacity.json of the baseline run (A).")],
    candidate: Annotated[Path, typer.Argument(help="capacity.json of the run under test (B).")],
    alpha: Annotated[float, typer.Option(help="One-sided significance level of the test.")] = 0.05,
    drop: Annotated[
        float, typer.Option(help="Capacity lost that counts as a regression (the shared definition).")
    ] = DEFAULT_DROP,
    across_versions: Annotated[
        bool, typer.Option(help="Compare runs of different engine versions (test an upgrade).")
    ] = False,
) -> None:
    """Exit 1 when B is a significant regression of A; 2 when the runs cannot be compared (one line why)."""
    try:
        result = compare(
            load(baseline),
            load(candidate),
            alpha=alpha,
            drop=drop,
            across_versions=across_versions,
        )
    except IncompatibleRunsError as err:
        usage_error(f"cannot compare {baseline} with {candidate}: {err}")
    except ValueError as err:
        usage_error(str(err))
    typer.echo(describe(result))
    if result.regression:
        raise typer.Exit(1)
