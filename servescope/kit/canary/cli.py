"""`servescope canary analyze`: judge a canary revision against the stable one, once or over a rollout."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel

from servescope.core.cli_errors import usage_error
from servescope.core.config import AlertsConfig, load_config
from servescope.core.durations import parse_duration
from servescope.core.settings_cli import settings_command
from servescope.kit.canary.analysis import Analysis, analyze
from servescope.kit.canary.html import page
from servescope.kit.canary.prometheus import Prometheus, PrometheusError
from servescope.kit.canary.report import markdown, text, to_json
from servescope.kit.canary.settings import AnalyzeSettings, parse_time

# 0 promote, 1 rollback, 2 inconclusive (the analysis); 3 it could not run.
FAILED = 3
app = typer.Typer(
    help="Canary analysis: a canary revision of a model against its stable revision, from Prometheus.",
    no_args_is_help=True,
    add_completion=False,
)


def _config(settings: AnalyzeSettings) -> AlertsConfig:
    try:
        cfg = load_config(settings.config)
    except ValueError as exc:
        usage_error(f"--config: {exc}", FAILED)
    if settings.topology:
        cfg = cfg.model_copy(update={"engine_topology": settings.topology})
    return cfg


def _write(analysis: Analysis, settings: AnalyzeSettings) -> None:
    import json

    outputs: list[tuple[Path | None, Callable[[], str]]] = [
        (settings.json_out, lambda: json.dumps(to_json(analysis), indent=2) + "\n"),
        (settings.markdown_out, lambda: markdown(analysis)),
        (settings.html_out, lambda: page(analysis)),
    ]
    for path, render in outputs:
        if path is not None:
            try:
                path.write_text(render())
            except OSError as exc:
                usage_error(f"cannot write {path}: {exc}", FAILED)


def watch(
    analyse: Callable[[float], Analysis],
    start: float,
    interval_s: float,
    count: int,
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    emit: Callable[[Analysis], None] = lambda _: None,
) -> Analysis:
    """Analyses at start, start + interval, ... until a rollback or `count` of them (0: no limit).

    A time already past is analysed at once: over a finished rollout (--at in the past) the analyses
    replay its steps from Prometheus' history; a time to come is waited for.
    """
    done = 0
    while True:
        at = start + done * interval_s
        if (wait := at - clock()) > 0:
            sleep(wait)
        result = analyse(at)
        emit(result)
        done += 1
        if result.verdict == "rollback" or (count and done >= count):
            return result


def _analyze(models: dict[type[BaseModel], BaseModel], _: dict[str, Any]) -> None:
    settings = models[AnalyzeSettings]
    assert isinstance(settings, AnalyzeSettings)
    cfg = _config(settings)
    window = settings.window or cfg.canary.window
    start = parse_time(settings.at) if settings.at else time.time()

    def analyse(at: float) -> Analysis:
        prometheus = Prometheus(settings.prometheus, at, settings.timeout_s)
        stable = settings.stable or None
        return analyze(prometheus, cfg, settings.model, settings.canary, stable=stable, window=window)

    def emit(analysis: Analysis) -> None:
        typer.echo(text(analysis), nl=False)
        _write(analysis, settings)

    try:
        if settings.watch:
            last = watch(analyse, start, parse_duration(settings.interval), settings.count, emit=emit)
        else:
            last = analyse(start)
            emit(last)
    except PrometheusError as exc:
        usage_error(str(exc), FAILED)
    raise typer.Exit(last.exit_code)


app.command(
    "analyze",
    epilog="Exit status: 0 promote, 1 rollback, 2 inconclusive (not enough data, or nothing to compare "
    "with), 3 the analysis could not run (a bad option value, Prometheus unreachable or refusing); an "
    "unknown option exits 2, as for every command.",
)(
    settings_command(
        [AnalyzeSettings],
        _analyze,
        doc="Judge a canary revision of a model against its stable revision, per SLI and overall.\n\n"
        "Reads both revisions' histograms and counters over --window from Prometheus (increase() of the "
        "raw series, named as the alerts config's topology names them) and judges each SLI with the test "
        "that fits it: Mann-Whitney U on the TTFT, inter-token and end-to-end latencies (each request "
        "known to its histogram bucket), Fisher's exact test on the shares of requests over the SLO "
        "bounds and of failed requests, a binomial test on preemptions per request; KV usage is "
        "reported. A revision with fewer than canary.min_requests requests in the window is not judged: "
        "inconclusive, never promote.",
        error_code=FAILED,
    )
)
