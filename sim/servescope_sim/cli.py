"""`servescope sim`: what the simulator offers (`serve --simulate`, `demo`)."""

from __future__ import annotations

import typer

from servescope_sim.engines import gpu_groups
from servescope_sim.models import MODELS
from servescope_sim.registry import SCENARIOS, make_scenario

app = typer.Typer(help="The simulated node: its GPU models and scenarios.", no_args_is_help=True)


@app.command()
def scenarios() -> None:
    """Every scenario `serve --simulate --scenario` and `demo --scenario` play, with what it does."""
    typer.echo("none: a slow daily-like load wave, no fault")
    for name in SCENARIOS:
        scenario = make_scenario(name, layout=gpu_groups(8, 4))
        typer.echo(f"{name}: {scenario.description}")


@app.command()
def models() -> None:
    """The GPU models the simulator knows (--gpu-model)."""
    for name in sorted(MODELS):
        model = MODELS[name]
        typer.echo(f"{name}: {model.memory_bytes / 2**30:.0f} GiB, {model.nvlinks} NVLinks")
