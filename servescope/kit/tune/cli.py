"""`servescope tune run SPACE.yaml`: search engine flags, restarting the engine for every trial."""

from __future__ import annotations

import inspect
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from pydantic import BaseModel

from servescope.core.cli_errors import usage_error
from servescope.core.cli_group import command_group
from servescope.core.errors import ServescopeError
from servescope.core.extensions import MissingDistributionError
from servescope.core.settings_cli import settings_command
from servescope.kit.capacity.runners import (
    HttpOptions,
    SimulatedEngine,
    http_runner,
    lag_bound,
    simulated_engine,
)
from servescope.kit.load.records import StepRunner
from servescope.kit.load.validity import ValidityRules
from servescope.kit.tune.launchers import CommandLauncher, KubernetesLauncher, Launcher, LaunchError
from servescope.kit.tune.report import tune_html, tune_json, tune_markdown
from servescope.kit.tune.settings import TuneRunSettings
from servescope.kit.tune.space import Space, Value, load_space
from servescope.kit.tune.strategies import Strategy, Study, run_study
from servescope.kit.tune.trials import Trial
from servescope.kit.tune.v1 import check_space, sends_priority

app = command_group(
    "Search engine flags (grid, random, Bayesian): each trial restarts the engine through a launcher "
    "and measures its capacity knee."
)


@dataclass(slots=True)
class SimulatedLauncher:
    """Boots the simulated engine with a trial's flags; a start the model refuses is a LaunchError."""

    warmup_s: float
    engine: SimulatedEngine

    def start(self, params: Mapping[str, Value]) -> StepRunner:
        try:
            return self.engine(params, warmup_s=self.warmup_s)
        except ServescopeError as err:
            raise LaunchError(str(err)) from err

    def stop(self) -> None:
        """Each step boots its own simulated engine: nothing stays running."""


def make_launcher(space: Space, run: TuneRunSettings) -> Launcher:
    """The launcher named on the command line; raises ValueError naming a missing option."""
    if run.launcher == "simulated":
        return SimulatedLauncher(space.warmup_s, simulated_engine("`servescope tune --launcher simulated`"))
    url = run.url
    if url is None and (run.launcher == "command" or run.execute):
        raise ValueError(f"--launcher {run.launcher} measures over HTTP: give --url")
    rules = ValidityRules(max_lag_p99_s=lag_bound(space.plan.slos))
    if run.calibrate and url is not None:
        from servescope.kit.load.calibrate import calibrated  # starts a mock server process

        found = calibrated(space.workload, space.api, lambda line: typer.echo(line, err=True))
        if found is not None:
            rules = replace(rules, client_ceiling=found.ceiling)

    def runner(params: Mapping[str, Value]) -> StepRunner:
        options = HttpOptions(
            workload=space.workload,
            api=space.api,
            warmup_s=space.warmup_s,
            rules=rules,
            priority=sends_priority(params),
        )
        return http_runner(cast(str, url), options, lambda line: typer.echo(line, err=True))

    if run.launcher == "command":
        template, health = run.command, run.health_url
        if template is None or "{flags}" not in template.split() or health is None:
            raise ValueError("--launcher command needs --command with a {flags} word and --health-url")
        return CommandLauncher(template, health, runner)
    if run.launcher == "kubernetes":
        if run.deployment is None or run.namespace is None:
            raise ValueError("--launcher kubernetes needs --deployment and --namespace")
        base = shlex.split(run.base_args or "")
        return KubernetesLauncher(run.deployment, run.namespace, base, runner, execute=run.execute)
    raise ValueError(f"--launcher must be simulated, command or kubernetes, got {run.launcher!r}")


def write_reports(study: Study, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "tune.md").write_text(tune_markdown(study), encoding="utf-8")
    (out / "tune.html").write_text(tune_html(study), encoding="utf-8")
    (out / "tune.json").write_text(json.dumps(tune_json(study), indent=1) + "\n", encoding="utf-8")


def _echo_trial(trial: Trial) -> None:
    note = f" ({trial.reason})" if trial.reason else ""
    typer.echo(f"  trial {trial.number}: {trial.label}: {trial.state} {trial.objective:.2f}{note}", err=True)


def _run(models: dict[type[BaseModel], BaseModel], given: dict[str, Any]) -> None:
    run = models[TuneRunSettings]
    assert isinstance(run, TuneRunSettings)
    if run.strategy not in ("grid", "random", "bayes"):
        usage_error(f"--strategy must be grid, random or bayes, got {run.strategy!r}")
    try:
        space = load_space(given["space_file"])
        check_space(space)
        chosen = make_launcher(space, run)
    except (ValueError, MissingDistributionError) as err:
        usage_error(str(err))
    except RuntimeError as err:
        usage_error(f"the client's calibration failed: {err}", 1)
    study = run_study(
        space,
        chosen,
        cast(Strategy, run.strategy),
        budget=run.trials,
        seed=run.seed,
        prune=run.prune,
        remeasure=run.remeasure,
        storage=run.storage,
        study_name=run.study_name,
        on_trial=_echo_trial,
        compare_random=run.compare_random,
    )
    if isinstance(chosen, KubernetesLauncher) and not run.execute:
        typer.echo("Dry run: these patches would be applied, one per trial (nothing was measured):")
        typer.echo("\n".join(chosen.printed))
        return
    typer.echo(tune_markdown(study))
    if run.out is not None:
        write_reports(study, run.out)


SPACE_FILE = inspect.Parameter(
    "space_file",
    inspect.Parameter.KEYWORD_ONLY,
    annotation=Annotated[Path, typer.Argument(help="The search space (YAML).")],
)
app.command("run")(
    settings_command(
        [TuneRunSettings],
        _run,
        doc="Search the space: every trial restarts the engine, finds its knee, and is reported.",
        extra=[SPACE_FILE],
    )
)
