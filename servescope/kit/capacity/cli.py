"""`servescope capacity run` (find the knee, size the fleet), `capacity compare A B` and `capacity weekly`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel

from servescope.core.cli_errors import usage_error
from servescope.core.cli_group import command_group
from servescope.core.errors import ServescopeError
from servescope.core.extensions import MissingDistributionError
from servescope.core.settings_cli import settings_command
from servescope.kit.capacity.compare import DEFAULT_DROP, IncompatibleRunsError, compare, describe
from servescope.kit.capacity.launch import Prepared, check_choice, measure, prepare_http, say, search_plan
from servescope.kit.capacity.report import capacity_markdown, write_reports
from servescope.kit.capacity.result import Provenance, load
from servescope.kit.capacity.runners import parse_flags, simulated_engine
from servescope.kit.capacity.search import KneeStatus
from servescope.kit.capacity.settings import CapacityRunSettings
from servescope.kit.capacity.weekly import WeeklySettings, weekly
from servescope.kit.load.settings import WorkloadSettings

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
    """The simulated engine (servescope-sim's, loaded only when asked for) with the run's flags."""
    mode = check_choice(run)
    plan = search_plan(run)
    start_simulated = simulated_engine("`servescope capacity run --simulate`")
    try:
        runner = start_simulated(parse_flags(run.set_flag or []), mode=mode, warmup_s=run.warmup)
    except ServescopeError as err:
        raise ValueError(f"the simulated engine did not start: {err}") from err
    workload = {"kind": "simulated engine"}
    provenance = Provenance("simulated", "simulated", "simulated", "simulated", workload, Provenance.now())
    return Prepared(plan, runner, provenance)


def _run(models: dict[type[BaseModel], BaseModel], _: dict[str, Any]) -> None:
    run, workload = models[CapacityRunSettings], models[WorkloadSettings]
    assert isinstance(run, CapacityRunSettings) and isinstance(workload, WorkloadSettings)
    try:
        prepared = prepare_simulated(run) if run.simulate else prepare_http(run, workload, say)
    except (ValueError, MissingDistributionError) as err:
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


def _weekly(models: dict[type[BaseModel], BaseModel], _: dict[str, Any]) -> None:
    run, workload, settings = models[CapacityRunSettings], models[WorkloadSettings], models[WeeklySettings]
    assert isinstance(run, CapacityRunSettings) and isinstance(workload, WorkloadSettings)
    assert isinstance(settings, WeeklySettings)
    if run.url is None:
        usage_error("--url: the weekly job measures an endpoint (the staging one)")
    try:
        result = weekly(run, workload, settings, say)
    except ValueError as err:
        usage_error(str(err))
    except RuntimeError as err:
        usage_error(str(err), 1)
    typer.echo(result.status_line)
    raise typer.Exit(EXIT_CODES[result.knee.status])


app.command(
    "weekly",
    epilog="Exit status: as `capacity run` (0 when the run measured a knee, whether or not it regressed: "
    "servescope_capacity_regression and its alert carry that); 1 when the export failed.",
)(
    settings_command(
        [CapacityRunSettings, WorkloadSettings, WeeklySettings],
        _weekly,
        doc="The weekly run (what the CronJob starts): measure --url's knee, compare it with the baseline "
        "kept in --state-dir (the first measured run, or one --promote'd), keep the run, and remote-write "
        "the result to Prometheus (--remote-write-url).",
    )
)
