"""`servescope tune run SPACE.yaml`: search engine flags, restarting the engine for every trial."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, cast

import typer

from servescope.capacity.runners import http_runner
from servescope.load.records import StepRunner
from servescope.tune.launchers import CommandLauncher, KubernetesLauncher, Launcher, LaunchError
from servescope.tune.report import tune_html, tune_json, tune_markdown
from servescope.tune.space import Space, Value, load_space
from servescope.tune.strategies import Strategy, Study, run_study
from servescope.tune.trials import Trial

app = typer.Typer(
    help="Search engine flags (grid, random, Bayesian): each trial restarts the engine through a launcher "
    "and measures its capacity knee.",
    no_args_is_help=True,
)


@app.callback()
def tune() -> None:
    """Engine-parameter search with a capacity knee (or goodput) as the objective."""


@dataclass(slots=True)
class SimulatedLauncher:
    """Boots the simulated engine with a trial's flags; a start the model refuses is a LaunchError."""

    warmup_s: float

    def start(self, params: Mapping[str, Value]) -> StepRunner:
        from servescope.sim.load_runner import EngineStartError, start_simulated  # only when chosen

        try:
            return start_simulated(params, warmup_s=self.warmup_s)
        except EngineStartError as err:
            raise LaunchError(str(err)) from err

    def stop(self) -> None:
        """Each step boots its own simulated engine: nothing stays running."""


def _fail(message: str) -> typer.Exit:
    typer.echo(f"servescope: error: {message}", err=True)
    return typer.Exit(2)


def make_launcher(space: Space, launcher: str, options: dict[str, str | bool | None]) -> Launcher:
    """The launcher named on the command line; raises ValueError naming a missing option."""
    if launcher == "simulated":
        return SimulatedLauncher(space.warmup_s)
    url = options.get("url")
    if not isinstance(url, str) and (launcher == "command" or options.get("execute")):
        raise ValueError(f"--launcher {launcher} measures over HTTP: give --url")

    def runner() -> StepRunner:
        return http_runner(cast(str, url))

    if launcher == "command":
        template, health = options.get("command"), options.get("health_url")
        if not isinstance(template, str) or "{flags}" not in template.split() or not isinstance(health, str):
            raise ValueError("--launcher command needs --command with a {flags} word and --health-url")
        return CommandLauncher(template, health, runner)
    if launcher == "kubernetes":
        deployment, namespace = options.get("deployment"), options.get("namespace")
        if not isinstance(deployment, str) or not isinstance(namespace, str):
            raise ValueError("--launcher kubernetes needs --deployment and --namespace")
        base = shlex.split(str(options.get("base_args") or ""))
        return KubernetesLauncher(deployment, namespace, base, runner, execute=bool(options.get("execute")))
    raise ValueError(f"--launcher must be simulated, command or kubernetes, got {launcher!r}")


def write_reports(study: Study, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "tune.md").write_text(tune_markdown(study), encoding="utf-8")
    (out / "tune.html").write_text(tune_html(study), encoding="utf-8")
    (out / "tune.json").write_text(json.dumps(tune_json(study), indent=1) + "\n", encoding="utf-8")


def _echo_trial(trial: Trial) -> None:
    note = f" ({trial.reason})" if trial.reason else ""
    typer.echo(f"  trial {trial.number}: {trial.label}: {trial.state} {trial.objective:.2f}{note}", err=True)


@app.command("run")
def run_command(
    # One option per knob of the search and of each launcher: a long signature by nature.
    space_file: Annotated[Path, typer.Argument(help="The search space (YAML).")],
    strategy: Annotated[str, typer.Option(help="grid, random or bayes (Optuna TPE).")] = "bayes",
    trials: Annotated[
        int | None, typer.Option(help="Engine starts at most (default: the grid's size).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random and Bayesian samplers.")] = 0,
    prune: Annotated[bool, typer.Option(help="Stop a trial whose early steps fall below the best.")] = True,
    remeasure: Annotated[int, typer.Option(help="Measure the top N again with fresh seeds.")] = 3,
    storage: Annotated[
        str | None, typer.Option(help="Optuna storage, e.g. sqlite:///tune.db (resumable).")
    ] = None,
    study_name: Annotated[str, typer.Option(help="Name of the study in the storage.")] = "servescope-tune",
    launcher: Annotated[str, typer.Option(help="simulated, command or kubernetes.")] = "simulated",
    url: Annotated[str | None, typer.Option(help="Endpoint to load (command and kubernetes).")] = None,
    command: Annotated[str | None, typer.Option(help="Engine command with a {flags} word.")] = None,
    health_url: Annotated[str | None, typer.Option(help="Polled until 200 after each start.")] = None,
    deployment: Annotated[str | None, typer.Option(help="Deployment to patch (kubernetes).")] = None,
    namespace: Annotated[str | None, typer.Option(help="Its namespace (kubernetes).")] = None,
    base_args: Annotated[str | None, typer.Option(help="Container args kept before the flags.")] = None,
    execute: Annotated[
        bool, typer.Option(help="Apply the Kubernetes patches (default: print them).")
    ] = False,
    out: Annotated[Path | None, typer.Option(help="Write tune.json, .md and .html here.")] = None,
) -> None:
    """Search the space: every trial restarts the engine, finds its knee, and is reported."""
    options: dict[str, str | bool | None] = {"url": url, "command": command, "health_url": health_url}
    options |= {"deployment": deployment, "namespace": namespace, "base_args": base_args, "execute": execute}
    if strategy not in ("grid", "random", "bayes"):
        raise _fail(f"--strategy must be grid, random or bayes, got {strategy!r}")
    try:
        space = load_space(space_file)
        chosen = make_launcher(space, launcher, options)
    except ValueError as err:
        raise _fail(str(err)) from None
    study = run_study(
        space,
        chosen,
        cast(Strategy, strategy),
        budget=trials,
        seed=seed,
        prune=prune,
        remeasure=remeasure,
        storage=storage,
        study_name=study_name,
        on_trial=_echo_trial,
    )
    if isinstance(chosen, KubernetesLauncher) and not execute:
        typer.echo("Dry run: these patches would be applied, one per trial (nothing was measured):")
        typer.echo("\n".join(chosen.printed))
        return
    typer.echo(tune_markdown(study))
    if out is not None:
        write_reports(study, out)
