"""`servescope demo`: start the whole stack on a simulated node and keep it running until Ctrl-C."""

from __future__ import annotations

import signal
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from servescope.core.settings_cli import usage_error
from servescope_sim.demo.children import ChildFailedError
from servescope_sim.demo.stack import DemoOptions, DemoStack
from servescope_sim.demo.state_dir import StateDirError
from servescope_sim.demo.verify import StackCheckError
from servescope_sim.registry import DEMO_SCENARIOS


def demo(  # noqa: PLR0917 (typer: one parameter per option)
    scenario: Annotated[
        str,
        typer.Option(
            "--scenario",
            help=f"What the simulated node goes through: {', '.join(DEMO_SCENARIOS)}. tour plays every "
            "fault in turn (about 25 minutes, then the last GPU is lost).",
        ),
    ] = "tour",
    gpus: Annotated[int, typer.Option("--gpus", min=1, max=64, help="Simulated H200 GPUs.")] = 8,
    engines: Annotated[
        int, typer.Option("--engines", min=0, max=16, help="Simulated vLLM engines, each on a group of GPUs.")
    ] = 4,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the simulation.")] = 1,
    state_dir: Annotated[
        Path,
        typer.Option(
            "--state-dir",
            help="Configs, data, logs, tokens, urls.json and pids.json go here; emptied at every start.",
        ),
    ] = Path(".servescope-demo"),
    duration: Annotated[
        float | None,
        typer.Option("--duration", min=1, help="Stop after this many seconds (default: run until Ctrl-C)."),
    ] = None,
) -> None:
    """Run the whole stack on this machine, on loopback: a simulated GPU node (NVML, fake dcgmi, vLLM
    engines with load), the exporter, the runbook service with its Alertmanager webhook, and (when their
    binaries are on PATH) Prometheus with the alert rules and Alertmanager routing to the webhook.
    Faults become alerts, alerts become incidents whose runbook read steps have run."""
    _check(scenario, gpus, engines)
    options = DemoOptions(scenario=scenario, gpus=gpus, engines=engines, seed=seed, state_dir=state_dir)
    raise typer.Exit(_run(options, duration))


def _check(scenario: str, gpus: int, engines: int) -> None:
    if scenario not in DEMO_SCENARIOS:
        usage_error(f"--scenario {scenario!r}: choose one of {', '.join(DEMO_SCENARIOS)}", 2)
    if engines > gpus:
        usage_error(f"--engines {engines}: more engines than --gpus {gpus}", 2)
    if scenario == "canary" and engines < 2:
        usage_error(
            f"--engines {engines}: the canary scenario needs a stable engine beside the canary (2+)", 2
        )


def _run(options: DemoOptions, duration: float | None) -> int:
    """Start the stack, keep it until `duration` or Ctrl-C, stop it whatever happened: the exit status."""
    stack = DemoStack(options, echo=typer.echo)
    # SIGTERM while starting must clean up like Ctrl-C does (Python's default would exit at once).
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        stack.start()
        typer.echo(stack.describe())
        status = stack.wait(duration)
    except StateDirError as exc:
        usage_error(str(exc), 2)
    except (ChildFailedError, StackCheckError) as exc:
        usage_error(str(exc), 1)
    except KeyboardInterrupt:
        typer.echo("interrupted")
        status = 130
    finally:
        stack.stop()
    typer.echo("stopped")
    return status


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
