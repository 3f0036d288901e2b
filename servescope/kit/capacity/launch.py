"""From `capacity run`'s settings to what a search needs: the plan, the runner (the simulated engine, or
HTTP with its validity rules and the client's calibrated ceiling), the Locust fallback, the provenance."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import cast

import typer

from servescope.core.cli_errors import usage_error
from servescope.kit.capacity.result import CapacityRun, Provenance, build_run, load
from servescope.kit.capacity.runners import HttpOptions, checked_http_runner, lag_bound, locust_runner
from servescope.kit.capacity.search import SearchPlan, find_knee
from servescope.kit.capacity.settings import CapacityRunSettings
from servescope.kit.capacity.sizing import provision
from servescope.kit.capacity.steps import Slo, StepSummary
from servescope.kit.load.records import LoopMode, StepRunner
from servescope.kit.load.settings import WorkloadSettings
from servescope.kit.load.validity import ValidityRules
from servescope.kit.load.workload import Workload

Say = Callable[[str], None]
# SearchPlan's fields and the options that set them.
PLAN_FIELDS = {
    "duration_s": "duration",
    "repeats": "repeats",
    "start_qps": "start_qps",
    "max_qps": "max_qps",
    "resolution": "resolution",
    "seed": "seed",
    "max_parts": "max_parts",
    "confidence": "confidence",
    "min_requests": "min_requests",
}


@dataclass(frozen=True, slots=True)
class Prepared:
    """Everything a search takes."""

    plan: SearchPlan
    runner: StepRunner
    provenance: Provenance
    fallback: StepRunner | None = None


def search_plan(run: CapacityRunSettings) -> SearchPlan:
    """The plan the settings ask for; ValueError naming a bad SLO, bound or baseline file."""
    slos = tuple(Slo.parse(text, run.quantile) for text in (run.slo or ["ttft:0.5"]))
    probe = run.probe_qps
    if run.probe_from is not None:
        baseline = load(run.probe_from)
        probe = baseline.plan.probe_qps
        if probe is None:
            raise ValueError(f"--probe-from {run.probe_from}: the baseline measured no probe rate")
    chosen = {field: getattr(run, name) for field, name in PLAN_FIELDS.items()}
    return SearchPlan(slos, probe_qps=probe, probe_share=run.probe_share if probe is None else None, **chosen)


def check_choice(run: CapacityRunSettings) -> LoopMode:
    """The loop mode, once the runner's options agree; ValueError naming what does not."""
    if run.simulate == (run.url is not None):
        raise ValueError("give exactly one of --simulate and --url")
    if run.mode not in ("open", "closed"):
        raise ValueError(f"--mode must be open or closed, got {run.mode!r}")
    return cast(LoopMode, run.mode)


def prepare_http(run: CapacityRunSettings, workload: WorkloadSettings, say: Say) -> Prepared:
    """Plan, HTTP runner and provenance; ValueError for bad input, RuntimeError when calibration fails."""
    mode = check_choice(run)
    plan = search_plan(run)
    if run.url is None:
        raise ValueError("--url is needed to load an endpoint")
    if run.set_flag:
        raise ValueError("--set configures the simulated engine; restart a real one with `servescope tune`")
    requests, skipped = workload.build()
    if skipped:
        say(f"--dataset {workload.dataset}: {skipped} lines skipped (bad, or no reply)")
    rules = ValidityRules(max_lag_p99_s=lag_bound(plan.slos, run.max_lag))
    calibration = ""
    if run.calibrate and mode == "open":
        from servescope.kit.load.calibrate import calibrated  # starts a mock server process

        found = calibrated(requests, workload.api, say)
        if found is not None:
            calibration = found.line()
            rules = replace(rules, client_ceiling=found.ceiling)
    options = HttpOptions(mode, requests, workload.api, run.warmup, rules, timeout_s=run.timeout)
    runner = checked_http_runner(run.url, options, say)
    # What was sent: the prompts fitted to the engine's tokenizer when it could count them.
    sent = runner.workload if isinstance(runner.workload, Workload) else requests
    described = sent.describe() | {"api": workload.api}
    provenance = Provenance(
        run.url, "http", runner.model, runner.version, described, Provenance.now(), calibration=calibration
    )
    fallback = locust_runner(runner, options, run.locust_workers) if run.locust_workers > 0 else None
    return Prepared(plan, runner, provenance, fallback)


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
