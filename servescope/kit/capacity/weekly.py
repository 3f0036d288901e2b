"""`servescope capacity weekly`: the run the CronJob makes, against one named staging endpoint.

Each run measures the knee (the same search as `capacity run`) into `<state-dir>/runs/<time>/`, compares
it with the baseline kept in `<state-dir>/baseline/` (the PersistentVolumeClaim the CronJob mounts), and
remote-writes the result to Prometheus: the knee and its interval, the baseline's knee, the run's
status and, when the two compare, whether it is a regression (capacity/compare.py, the one definition).
The first measured run becomes the baseline; a later one only with `--promote` (after an intended
change), so a slow slide week after week stays visible against the same baseline. The state directory
keeps the last KEEP_RUNS runs.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from servescope.core.catalog import capacity as c
from servescope.core.settings_cli import FixedOptions, setting
from servescope.kit.capacity.compare import DEFAULT_DROP, Comparison, IncompatibleRunsError, compare, describe
from servescope.kit.capacity.launch import Say, measure, prepare_http
from servescope.kit.capacity.remote_write import Series, push
from servescope.kit.capacity.report import write_reports
from servescope.kit.capacity.result import CapacityRun, load
from servescope.kit.capacity.settings import CapacityRunSettings
from servescope.kit.load.settings import WorkloadSettings

KEEP_RUNS = 26  # half a year of weekly runs
BASELINE = "baseline"


class WeeklySettings(FixedOptions):
    """Where the weekly job keeps its state and sends its result."""

    state_dir: Path = setting(
        Path("/var/lib/servescope/capacity"), "--state-dir", "Baseline and past runs (the CronJob's volume)."
    )
    target: str = setting("staging", "--target", "Name of the endpoint measured: the series' target label.")
    remote_write_url: str = setting(
        "", "--remote-write-url", "Prometheus remote-write endpoint for the result; empty: not exported."
    )
    promote: bool = setting(
        False, "--promote/--no-promote", "Make this run the baseline when it measures a knee."
    )
    drop: float = setting(
        DEFAULT_DROP, "--drop", "Capacity lost that counts as a regression (the shared definition)."
    )


def baseline_of(state: Path) -> CapacityRun | None:
    path = state / BASELINE / "capacity.json"
    return load(path) if path.is_file() else None


def run_once(
    run: CapacityRunSettings, workload: WorkloadSettings, weekly: WeeklySettings, say: Say
) -> tuple[CapacityRun, Comparison | None]:
    """Measure, compare with the baseline, keep the run (and the baseline); ValueError on bad input."""
    baseline = baseline_of(weekly.state_dir)
    if baseline is None:
        probed = run.model_copy(
            update={"probe_share": 1 - weekly.drop, "probe_qps": None, "probe_from": None}
        )
        say(f"no baseline in {weekly.state_dir}: this run becomes it when it measures a knee")
    else:
        probed = run.model_copy(
            update={"probe_qps": baseline.plan.probe_qps, "probe_from": None, "probe_share": None}
        )
    prepared = prepare_http(probed, workload, say)
    result = measure(probed, prepared)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    write_reports([result], weekly.state_dir / "runs" / stamp, f"Capacity of {weekly.target} ({stamp})")
    comparison = None
    if baseline is not None:
        try:
            comparison = compare(baseline, result, drop=weekly.drop)
            say(describe(comparison))
        except IncompatibleRunsError as err:
            say(f"not compared with the baseline: {err}")
        except ValueError as err:
            say(f"not compared with the baseline: {err}")
    if result.knee.status == "measured" and (baseline is None or weekly.promote):
        write_reports([result], weekly.state_dir / BASELINE, f"Baseline capacity of {weekly.target}")
        say(f"baseline: {result.status_line}")
    _prune(weekly.state_dir / "runs")
    return result, comparison


def _prune(runs: Path) -> None:
    for old in sorted(p for p in runs.iterdir() if p.is_dir())[:-KEEP_RUNS]:
        shutil.rmtree(old, ignore_errors=True)


def series(
    result: CapacityRun, comparison: Comparison | None, baseline: CapacityRun | None, target: str, now_ms: int
) -> list[Series]:
    """The samples of one weekly run (catalog/capacity.py)."""
    run = {"target": target, "label": result.label}
    knee = result.knee
    out = [
        Series(c.RUN_STATUS.name, {**run, "status": knee.status}, 1.0, now_ms),
        Series(c.RUN_TIMESTAMP.name, run, now_ms / 1000, now_ms),
    ]
    if knee.status == "measured" and knee.estimate is not None:
        out.append(Series(c.KNEE.name, run, knee.estimate, now_ms))
        out.append(Series(c.KNEE_LOWER.name, run, knee.lower, now_ms))
        if knee.upper != float("inf"):
            out.append(Series(c.KNEE_UPPER.name, run, knee.upper, now_ms))
    if baseline is not None and baseline.knee.estimate is not None:
        out.append(Series(c.BASELINE_KNEE.name, run, baseline.knee.estimate, now_ms))
    if comparison is not None:
        out.append(Series(c.REGRESSION.name, run, 1.0 if comparison.regression else 0.0, now_ms))
        if comparison.ratio[1] == comparison.ratio[1]:  # not NaN: a latency comparison was made
            out.append(Series(c.PROBE_RATIO.name, run, comparison.ratio[1], now_ms))
    return out


def weekly(
    run: CapacityRunSettings, workload: WorkloadSettings, settings: WeeklySettings, say: Say
) -> CapacityRun:
    """One weekly run, exported when a remote-write URL is given; RuntimeError when the export fails."""
    baseline = baseline_of(settings.state_dir)
    result, comparison = run_once(run, workload, settings, say)
    if settings.remote_write_url:
        samples = series(result, comparison, baseline, settings.target, int(time.time() * 1000))
        push(settings.remote_write_url, samples)
        say(f"wrote {len(samples)} series to {settings.remote_write_url}")
    return result
